"""headflow.metrics: observables, optimal transport, clustering and labelled datasets.

The top layer: imports particles and meanfield, POT, scikit-learn and xarray.
"""

from .clustering import cluster_labels, cluster_sizes, n_clusters, silhouette
from .dataset import COORDS, model_attrs, netcdf_safe, trajectory_to_dataset
from .energy import energy, head_energies, leaders, log_head_energies, mean_entropy

__all__ = [
    "cluster_labels",
    "cluster_sizes",
    "n_clusters",
    "silhouette",
    "COORDS",
    "model_attrs",
    "netcdf_safe",
    "trajectory_to_dataset",
    "energy",
    "head_energies",
    "leaders",
    "log_head_energies",
    "mean_entropy",
]
