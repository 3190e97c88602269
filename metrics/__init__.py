"""headflow.metrics: observables, optimal transport, clustering and labelled datasets.

The top layer: imports particles and meanfield, POT, scikit-learn and xarray.
"""

from ._data.dataset import COORDS, VARIABLES, trajectory_to_dataset
from ._data.heads import head_geometry
from ._data.provenance import CONVENTIONS, dependency_versions, model_attrs, netcdf_safe, provenance, summation_paths
from ._figures import accessor  # noqa: F401  (registers ds.attn)
from ._figures.accessor import AttnAccessor, model_from_attrs
from ._figures.animation import animate, plot_angles, plot_sphere
from ._figures.geometry_plot import plot_head_geometry
from ._figures.plotting import (
    CURVES,
    plot_chaos_collapse,
    plot_chaos_horizon,
    plot_curves,
    plot_phase_diagram,
)
from ._figures.report import limit_study_frame, limit_study_table, plot_limit_study
from ._figures.study_plot import plot_study
from ._observables.clustering import (
    cluster_labels,
    cluster_sizes,
    n_clusters,
    n_clusters_batch,
    silhouette,
)
from ._observables.density import (
    check_density_fn,
    circle_density_quantile,
    density_of_angle,
    sample_circle_density,
    sample_sphere_density,
)
from ._observables.density_families import ExpressionDensity, FamilyDensity
from ._observables.energy import energy, head_energies, leaders, log_head_energies, mean_entropy
from ._observables.harmonics import harmonic_amplitudes, harmonic_multiplicity, sliced_w2_to_uniform_s2
from ._observables.metastability import Plateau, StaircaseStep, cluster_energy, plateaus, staircase
from ._observables.pairs import clustered_pair_fraction
from ._observables.reference_transport import (
    EMD_MAX_ELEMENTS,
    SlicedReference,
    circle_quantile_atoms,
    circle_wasserstein,
)
from ._observables.registry import METRICS, Metric, evaluate
from ._observables.transport import (
    MAX_DENSE_PAIRS,
    distance_to_uniform,
    geodesic_cost,
    sinkhorn_divergence,
    sliced_wasserstein_embedded,
    sliced_wasserstein_sphere,
    wasserstein,
)
from ._runs.failures import FailedCellWarning
from ._runs.integrity import DamagedFileWarning
from ._runs.models import SweepModel
from ._runs.store import StoreMigrationWarning
from ._runs.sweep import SWEEP_PARAMS, CellWarning, default_model, run_sweep
from ._runs.verify import VerifyReport, verify
from ._statistics.horizon import (
    ResolutionWarning,
    breakdown_law_cdf,
    breakdown_law_mean,
    breakdown_time,
    fit_horizon_slope,
    predicted_breakdown_time,
)
from ._statistics.rates import RateFit, fit_rate
from ._studies.chaos import chaos_horizon_study
from ._studies.limit import mean_field_limit_study, sample_grid_measure
from ._studies.phase import PHASE_STATISTICS, phase_diagram
from ._studies.sentences import sentence_flow

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
    "plot_study",
    "plot_chaos_collapse",
    "plot_chaos_horizon",
    "plot_head_geometry",
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
    "CellWarning",
    "FailedCellWarning",
    "StoreMigrationWarning",
    "verify",
    "VerifyReport",
    "DamagedFileWarning",
    "AttnAccessor",
    "VARIABLES",
    "CURVES",
    "MAX_DENSE_PAIRS",
    "EMD_MAX_ELEMENTS",
]

#: the public submodules, loaded on first use (``metrics.sentences`` after ``import metrics``, as the
#: docs write them, without making ``import metrics`` read the tokenizers or the spectral references)
_SUBMODULES = ("sentences", "spectral_reference", "io", "extend")


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
