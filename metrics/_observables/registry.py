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

from particles import MultiHead
from particles.validation import (
    NONE,
    AnyOf,
    Boolean,
    Function,
    Instance,
    Options,
    Points,
    Relation,
    SequenceOf,
    Weights,
    declare,
    one_per,
    weights_or_uniform,
)

from .clustering import cluster_sizes, n_clusters
from .transport import distance_to_uniform

__all__ = ["Metric", "METRICS", "evaluate"]


_TEXT = Instance(str, test=bool, what="a non-empty string (a CF attr)", bad=("", 3, None))


@declare(fn=Function("fn(x, weights=None, model=None) -> float"), long_name=_TEXT, units=_TEXT, needs_model=Boolean(),
         on_sphere=Boolean())
@dataclass(frozen=True)
class Metric:
    """A named observable of a point cloud: ``fn(x, weights=None, model=None) -> float`` with its
    CF attrs (``units="1"`` when dimensionless); ``needs_model`` when it reads the model; ``on_sphere`` when
    it measures tokens on the unit sphere (geodesic distances: a flat run's tokens have no value)."""

    fn: Callable
    long_name: str
    units: str
    needs_model: bool = False
    on_sphere: bool = False


METRICS = {
    "n_clusters": Metric(lambda x, w=None, model=None: n_clusters(x, w, eps=1e-3),
                         "number of clusters (geodesic eps = 1e-3)", "1", on_sphere=True),
    "largest_cluster": Metric(lambda x, w=None, model=None: float(cluster_sizes(x, w, eps=1e-3)[0]),
                              "mass of the largest cluster", "1", on_sphere=True),
    "distance_to_uniform": Metric(lambda x, w=None, model=None: distance_to_uniform(x, w, n_projections=100),
                                  "spherical sliced W2 to the uniform measure", "turn",
                                  on_sphere=True),
    "energy_multi": Metric(lambda x, w=None, model=None: model.energy(x), "total energy E_multi", "1", True),
    "log_energy_multi": Metric(lambda x, w=None, model=None: float(np.logaddexp.reduce(model.log_head_energies(x))),
                               "log of the total energy", "1", True),
    "mean_entropy": Metric(lambda x, w=None, model=None: float(model.entropy(x).mean()),
                           "token- and head-averaged attention entropy (nats)", "1", True),
}


def _model_given(model, names):
    return model is not None or not any(METRICS[n].needs_model for n in names)


@declare(names=SequenceOf(Options(*METRICS), hint="Pass a list of metric names (wrap a single name in a list)."),
         x=Points(atol=1e-8), weights=AnyOf(NONE, Weights(probability=True)), model=AnyOf(NONE, Instance(MultiHead)),
         relations=[one_per("weights", "x"), Relation(("model", "names"), _model_given, "is needed by a model-"
                                                      "dependent metric: pass model=MultiHead(...)",
                                                      breaks={"names": ["energy_multi"]})])
def evaluate(names, x, weights=None, model=None) -> dict:
    """Evaluate the named metrics on one point cloud; returns ``{name: value}``, a float, or an int for
    a count (``n_clusters``).

    Parameters
    ----------
    names : list of str
        Keys of :data:`METRICS` (a bare string is refused: wrap it in a list).
    x : ndarray of shape (n, d), unit rows
    weights : ndarray of shape (n,), optional
    model : particles.MultiHead, optional
        Required by the model-dependent metrics (``needs_model``).
    """
    weights = weights_or_uniform(weights, len(x))
    out = {}
    for name in names:
        value = METRICS[name].fn(x, weights, model)
        out[name] = int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else float(value)
    return out
