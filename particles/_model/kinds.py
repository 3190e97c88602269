r"""Attention kinds and update rules: how one head's sums become its output, and how the
head outputs become the velocity.

A kind (:data:`ATTENTION_KINDS`) states which pass its weights come from (``"exp"``: the
summation layer's :math:`\log Z_i` and softmax mean; ``"relu"``: the blocked ReLU sums),
the output rule :math:`f^h_i` from those sums, the velocity scale, and its dense weights.
To add a kind: one :class:`Kind` entry here (and, for an ``"exp"`` pass, nothing else; a
new pass type also needs a function in :mod:`particles._summation.exact`).

References: docs/theory.md §1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .._core.errors import InvalidParameterError
from .._core.numerics import LOG_OVERFLOW
from .._summation.exact import HeadSums
from .._summation.routes import fast_route

__all__ = ["Kind", "ATTENTION_KINDS", "KINDS", "MEAN_FIELD_KINDS", "UPDATES", "safe_exp"]



@dataclass(frozen=True)
class Kind:
    r"""One attention kind.

    1. ``sums``: ``"exp"`` or ``"relu"``, the pass its weights come from;
    2. ``output(p, Wt, n, c)``: the head output f_i (rows) from the pass ``p`` of that head,
       the transposed value matrix, the number of sources n and the log time scale c;
    3. ``scale(n)``: the factor of Σ_h f_i in the velocity;
    4. ``dense(s)``: the dense weights from the scaled scores β s (masked entries −inf);
    5. ``exp_rule``, for an ``"exp"`` kind whose output is one of the two rules the closed forms
       know: ``"mean"`` (softmax, :math:`f_i = S_i/Z_i`) or ``"partition"`` (USA, :math:`f_i =
       e^{-c}Z_i \cdot S_i/Z_i`); the fused scalar-head pass of :class:`~particles.Ensemble`, the
       mean-field solvers and the studies implement these two. None for any other kind (the
       generic paths apply its ``output``);
    6. ``beta_free``: its weights do not depend on β > 0 (row-normalised ReLU: the β of ReLU(βs)
       cancels in the normalisation), so its pass runs on the unscaled scores.

    ``output`` sees one head's sums of one system (rows i) or of a stack of systems (a leading
    axis): it broadcasts over leading axes.
    """

    name: str
    sums: str
    output: Callable
    scale: Callable
    dense: Callable
    exp_rule: str | None = None
    beta_free: bool = False

    @property
    def normalised(self) -> bool:
        """The output is the attention mean :math:`S_i/Z_i` (``exp_rule`` "mean"): the mean-field
        velocity divides each head's sum by its partition function."""
        return self.exp_rule == "mean"

    def time_shift(self, log_time_scale: float) -> float:
        """The c of the factor :math:`e^{-c}` the output carries: the model's log time scale for the
        partition-scaled rule (USA), 0 for every other kind (their time is not rescaled)."""
        return log_time_scale if self.exp_rule == "partition" else 0.0


def safe_exp(a) -> np.ndarray:
    """exp that returns +inf past the float64 range instead of warning."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.inf)
    ok = a < LOG_OVERFLOW + 9.0
    out[ok] = np.exp(a[ok])
    return out


class LogOverflow(ArithmeticError):
    """An output rule's log-weight passed :data:`LOG_OVERFLOW` (args: that log-weight);
    the model turns it into a :class:`SolverError` that names the head and the fix."""


def _usa_output(p: HeadSums, Wt, n, c):
    logscale = p.logz - c
    top = float(logscale.max())
    if top > LOG_OVERFLOW:
        raise LogOverflow(top)
    return np.exp(logscale)[..., None] * (p.mean @ Wt)


def _rownorm_output(p: HeadSums, Wt, n, c):
    # a row attending to nothing contributes zero
    tot = p.total
    safe = np.where(tot > 0, tot, 1.0)
    return np.where((tot > 0)[..., None], p.mean / safe[..., None], 0.0) @ Wt


def _rownorm_dense(s):
    r = np.maximum(s, 0.0)
    tot = r.sum(-1, keepdims=True)
    return np.divide(r, tot, out=np.zeros_like(r), where=tot > 0)


#: every attention kind by name (module docstring)
ATTENTION_KINDS = {
    "usa": Kind("usa", "exp", _usa_output, lambda n: 1.0 / n, np.exp, exp_rule="partition"),
    "softmax": Kind("softmax", "exp", lambda p, Wt, n, c: p.mean @ Wt, lambda n: 1.0,
                    lambda s: np.exp(s - logsumexp(s, axis=-1, keepdims=True)), exp_rule="mean"),
    "relu": Kind("relu", "relu", lambda p, Wt, n, c: (p.mean @ Wt) / n, lambda n: 1.0,
                 lambda s: np.maximum(s, 0.0) / s.shape[-1]),
    "relu_rownorm": Kind("relu_rownorm", "relu", _rownorm_output, lambda n: 1.0, _rownorm_dense, beta_free=True),
}

#: attention kind -> the pass its weights come from ("exp" or "relu"), as :data:`ATTENTION_KINDS`
KINDS = {name: k.sums for name, k in ATTENTION_KINDS.items()}

#: the kinds with an ``exp_rule`` (USA, softmax): those the mean-field solvers, the closed forms, the
#: studies and the fused ensemble pass implement
MEAN_FIELD_KINDS = tuple(name for name, k in ATTENTION_KINDS.items() if k.exp_rule is not None)

#: update rule -> the geometry it needs (None: either). v_i = scale · Σ_h f_i^h, then
#: "standard": P_{x_i} v_i (sphere) or v_i (flat);
#: "pre_ln" (flat): v_i computed from the normalised tokens x_j/‖x_j‖ (pre-LN residual stream);
#: "post_ln" (sphere): v_i unprojected, so that Euler with the retraction is the post-LN layer
#: x ← (x + dt v)/‖x + dt v‖, whose dt → 0 limit is the sphere flow;
#: "ngpt" (sphere): P_{x_i}(v_i/‖v_i‖), the continuous nGPT update (normalised step direction).
UPDATES = {"standard": None, "pre_ln": "flat", "post_ln": "sphere", "ngpt": "sphere"}


def apply_update(update: str, geom, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The velocity of update rule ``update`` from the summed head outputs v (:data:`UPDATES`)."""
    if update in ("pre_ln", "post_ln"):
        return v
    if update == "ngpt":
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        v = np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)
    return geom.project_tangent(x, v)


def check_fast(M: np.ndarray, beta: float, kind: str, on_sphere: bool) -> None:
    """Refuse summation='fast' up front where no head can take a fast route."""
    if KINDS[kind] != "exp":
        raise InvalidParameterError(
            f"summation='fast' needs exponential heads; kind={kind!r} (ReLU) is not smooth and has no fast "
            "path with a proven error. Use summation='exact' or 'auto'."
        )
    for h, Mh in enumerate(M):
        info = fast_route(beta * Mh, on_sphere)
        if info.route is None:
            raise InvalidParameterError(
                f"summation='fast' cannot be used for head {h}: {info.reason}. Use summation='auto' or 'exact'."
            )


def usa_overflow_message(h: int, top: float, beta: float, x: np.ndarray) -> str:
    """Why a USA head overflowed: the log-weight itself (never its exponential), and whether
    the state had left the sphere (a Runge–Kutta stage pushed off by a huge velocity)."""
    msg = (f"USA head {h} overflows float64 at beta={beta:g}: the log of its largest row weight is "
           f"{top:.4g} > {LOG_OVERFLOW:g}")
    R = float(np.sqrt(np.max(np.einsum("ij,ij->i", x, x))))
    if R > 1.0 + 1e-6:
        msg += (f", evaluated at a Runge–Kutta stage state that left the sphere (max ‖x_i‖ = {R:.3g}): "
                "the velocity, of order exp(beta ‖M‖)/n, is far too large for this dt")
    return msg + ". Build the model with log_time_scale='auto' to integrate in rescaled time."
