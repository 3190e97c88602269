"""Named metrics, so that sweeps and the accessor can ask for them by name.

:data:`METRICS` maps a name to a :class:`Metric`. A new entry must provide:

1. ``fn(x, weights=None, model=None) -> float``: a pure function of the point cloud
   (``model`` only for model-dependent observables such as the energy);
2. ``long_name`` and ``units`` (``"1"`` if dimensionless) for the Dataset attrs;
3. a test of an invariance and of one known value in ``tests/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .clustering import cluster_sizes, n_clusters
from .transport import distance_to_uniform

__all__ = ["Metric", "METRICS", "evaluate"]


@dataclass(frozen=True)
class Metric:
    fn: Callable
    long_name: str
    units: str
    needs_model: bool = False


METRICS = {
    "n_clusters": Metric(lambda x, w=None, model=None: n_clusters(x, w, eps=1e-3),
                         "number of clusters (geodesic eps = 1e-3)", "1"),
    "largest_cluster": Metric(lambda x, w=None, model=None: float(cluster_sizes(x, w, eps=1e-3)[0]),
                              "mass of the largest cluster", "1"),
    "distance_to_uniform": Metric(lambda x, w=None, model=None: distance_to_uniform(x, w, n_projections=100),
                                  "spherical sliced W2 to the uniform measure", "turn"),
    "energy_multi": Metric(lambda x, w=None, model=None: model.energy(x), "total energy E_multi", "1", True),
    "log_energy_multi": Metric(lambda x, w=None, model=None: float(np.logaddexp.reduce(model.log_head_energies(x))),
                               "log of the total energy", "1", True),
    "mean_entropy": Metric(lambda x, w=None, model=None: float(model.entropy(x).mean()),
                           "token- and head-averaged attention entropy (nats)", "1", True),
}


def evaluate(names, x, weights=None, model=None) -> dict:
    """Evaluate the named metrics on one point cloud; returns ``{name: float}``."""
    from particles.validation import check_choice

    out = {}
    for name in names:
        check_choice(name, "metric", METRICS, "evaluate")
        m = METRICS[name]
        if m.needs_model and model is None:
            raise ValueError(f"metric {name!r} needs the model: pass model=...")
        out[name] = float(m.fn(x, weights, model))
    return out
