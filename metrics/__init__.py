"""headflow.metrics: observables, optimal transport, clustering and labelled datasets.

The top layer: imports particles and meanfield, POT, scikit-learn and xarray.
"""

from . import accessor  # noqa: F401  (registers ds.attn)
from ._sweep_models import SweepModel
from .accessor import model_from_attrs
from .animation import animate, plot_angles, plot_sphere
from .chaos import chaos_horizon_study
from .clustering import cluster_labels, cluster_sizes, n_clusters, n_clusters_batch, silhouette
from .dataset import (
    CONVENTIONS,
    COORDS,
    dependency_versions,
    model_attrs,
    netcdf_safe,
    provenance,
    summation_paths,
    trajectory_to_dataset,
)
from .density import (
    check_density_fn,
    circle_density_quantile,
    density_of_angle,
    sample_circle_density,
    sample_sphere_density,
)
from .density_families import ExpressionDensity, FamilyDensity
from .energy import energy, head_energies, leaders, log_head_energies, mean_entropy
from .heads import head_geometry
from .horizon import (
    ResolutionWarning,
    breakdown_law_cdf,
    breakdown_law_mean,
    breakdown_time,
    fit_horizon_slope,
    harmonic_amplitudes,
    harmonic_multiplicity,
    predicted_breakdown_time,
    sliced_w2_to_uniform_s2,
)
from .limit import (
    RateFit,
    SlicedReference,
    circle_quantile_atoms,
    circle_wasserstein,
    fit_rate,
)
from .metastability import Plateau, StaircaseStep, cluster_energy, plateaus, staircase
from .phase import PHASE_STATISTICS, clustered_pair_fraction, phase_diagram
from .plotting import plot_chaos_collapse, plot_chaos_horizon, plot_curves, plot_phase_diagram
from .registry import METRICS, Metric, evaluate
from .report import limit_study_frame, limit_study_table, plot_limit_study
from .sentences import sentence_flow
from .study import mean_field_limit_study, sample_grid_measure
from .sweep import SWEEP_PARAMS, default_model, run_sweep
from .transport import (
    distance_to_uniform,
    geodesic_cost,
    sinkhorn_divergence,
    sliced_wasserstein_embedded,
    sliced_wasserstein_sphere,
    wasserstein,
)

__all__ = [
    "model_from_attrs",
    "METRICS",
    "Metric",
    "evaluate",
    "SWEEP_PARAMS",
    "SweepModel",
    "default_model",
    "run_sweep",
    "phase_diagram",
    "PHASE_STATISTICS",
    "clustered_pair_fraction",
    "mean_field_limit_study",
    "sample_grid_measure",
    "fit_rate",
    "RateFit",
    "SlicedReference",
    "circle_wasserstein",
    "circle_quantile_atoms",
    "sliced_wasserstein_embedded",
    "limit_study_frame",
    "limit_study_table",
    "plot_limit_study",
    "plot_curves",
    "plot_angles",
    "plot_sphere",
    "animate",
    "plot_phase_diagram",
    "plot_chaos_collapse",
    "plot_chaos_horizon",
    "density_of_angle",
    "ExpressionDensity",
    "FamilyDensity",
    "check_density_fn",
    "circle_density_quantile",
    "sample_circle_density",
    "sample_sphere_density",
    "distance_to_uniform",
    "geodesic_cost",
    "sinkhorn_divergence",
    "sliced_wasserstein_sphere",
    "wasserstein",
    "cluster_labels",
    "cluster_sizes",
    "n_clusters",
    "n_clusters_batch",
    "silhouette",
    "COORDS",
    "CONVENTIONS",
    "provenance",
    "dependency_versions",
    "summation_paths",
    "model_attrs",
    "netcdf_safe",
    "trajectory_to_dataset",
    "head_geometry",
    "sentence_flow",
    "energy",
    "head_energies",
    "leaders",
    "log_head_energies",
    "mean_entropy",
    "Plateau",
    "StaircaseStep",
    "cluster_energy",
    "plateaus",
    "staircase",
    "chaos_horizon_study",
    "sliced_w2_to_uniform_s2",
    "harmonic_amplitudes",
    "harmonic_multiplicity",
    "breakdown_time",
    "predicted_breakdown_time",
    "breakdown_law_cdf",
    "breakdown_law_mean",
    "fit_horizon_slope",
    "ResolutionWarning",
]
