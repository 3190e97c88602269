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

from particles.validation import (
    InvalidParameterError,
    check_bool,
    check_callable,
    check_instance,
    check_names,
    check_points,
    check_weights,
)

from .clustering import cluster_sizes, n_clusters
from .transport import distance_to_uniform

__all__ = ["Metric", "METRICS", "evaluate"]


@dataclass(frozen=True)
class Metric:
    fn: Callable
    long_name: str
    units: str
    needs_model: bool = False

    def __post_init__(self):
        check_callable(self.fn, "fn", "Metric", signature="fn(x, weights=None, model=None) -> float")
        for name in ("long_name", "units"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise InvalidParameterError(
                    f"The {name!r} parameter of Metric must be a non-empty string (CF attrs); "
                    f"got {getattr(self, name)!r}."
                )
        check_bool(self.needs_model, "needs_model", "Metric")


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
    """Evaluate the named metrics on one point cloud; returns ``{name: float}``.

    Parameters
    ----------
    names : list of str
        Keys of :data:`METRICS` (a bare string is refused: wrap it in a list).
    x : ndarray of shape (n, d), unit rows
    weights : ndarray of shape (n,), optional
    model : particles.MultiHead, optional
        Required by the model-dependent metrics (``needs_model``).
    """
    from particles import MultiHead

    names = check_names(names, "names", METRICS, "evaluate")
    x = check_points(x, "x", "evaluate", atol=1e-8)
    weights = check_weights(weights, len(x), caller="evaluate")
    if model is not None:
        check_instance(model, MultiHead, "model", "evaluate")
    out = {}
    for name in names:
        m = METRICS[name]
        if m.needs_model and model is None:
            raise InvalidParameterError(f"metric {name!r} of evaluate needs the model: pass model=MultiHead(...).")
        out[name] = float(m.fn(x, weights, model))
    return out
