r"""One pass for the softmax heads of an :class:`~particles.Ensemble` that share a score direction.

Heads :math:`M_h = m_h I` (all :math:`m_h > 0`), :math:`W_h = w_h I` of a row-normalised kind
(softmax) attend through the same Gram matrix :math:`G = XX^\top` of each system, scaled:
the logits of head h are :math:`\beta m_h G`. With :math:`m_0 = \min_h m_h`, :math:`k_h = m_h/m_0`,
:math:`a = \beta m_0` and the Cauchy–Schwarz shift :math:`c = \max_j\|x_j\|^2 = \max_j G_{jj}` of the
system (:math:`c = 1` on the sphere, where the row maximum of :math:`G` is its diagonal),

.. math:: E = \exp\big(a(G - \sigma)\big),\qquad E_h = E^{\circ k_h}
          = \exp\big(\beta m_h (G - \sigma)\big),

with the shift :math:`\sigma = c` (then :math:`E \in (0, 1]`) where the largest logit :math:`k_h a c` exceeds
:data:`SHIFT_ABOVE` = 300, and :math:`\sigma = 0` below (every entry within :math:`e^{\pm 300}`: the row
normalisation below cancels the factor, and the pass saves one sweep over the logits),

.. math:: v = P_X\Big(\sum_h w_h\,\mathrm{diag}(Z_h)^{-1}E_h\Big)X,\qquad Z_h = E_h\mathbf 1,

the velocity of the heads, every head's rows normalised by their own sums. So one evaluation
forms one Gram GEMM, one exp, and for every other distinct strength either an elementwise
product of powers already formed (:math:`k_h` a small integer, :math:`E^{\circ 2} = E\circ E`,
:math:`E^{\circ 4} = E^{\circ 2}\circ E^{\circ 2}`, :math:`E^{\circ 3} = E^{\circ 2}\circ E`) or
:math:`\exp(k_h\,a(G - \sigma))` (any other ratio); the heads are combined before the one sums GEMM
and the one tangent projection. Heads of the same strength share one :math:`E_h` (their value
weights add up). A power agrees with the exp of its head to a few ulp of its argument (the
relative error of :math:`E` is that of :math:`\exp` at :math:`a(G-\sigma)`, k times over, as the
head's own exp of :math:`k\,a(G-\sigma)`); entries that underflow do so to 0 in both, and no row sum
underflows on the sphere (:math:`Z_{h,i} \ge w_iE_{h,ii} = w_i e^{\beta m_h(\|x_i\|^2 - \sigma)}`). Off it
(a row whose sums underflow under the shift), the pass declines and the per-head passes of
:mod:`~particles._model.ensemble_kernels` redo the rows with their exact maxima.

At n = 32, d = 16, 128 systems, three heads of strengths 0.5, 1, 2, one thread, an evaluation takes about half
the time of the three per-head passes (``benchmarks/bench_shared_pass.py``). The heads are combined by one einsum
over (H, S, n, n), :math:`C_{ij} = \sum_h (w_h/Z_{h,i}) E_{h,ij}`: H row scalings (a broadcast operand) and H - 1
sums took 1.6x as long (about 300 against 175 µs of an evaluation of about 800 µs). The scale a rides on the
(S, n, d) operand of the Gram GEMM, a scalar for a chunk of one β (a per-system operand broadcasts, at twice the
cost). A layout (S, H, n, n) with each head's E
strided across the systems ran its elementwise passes 4x slower than the head-major (H, S, n, n) kept here; one
GEMM over the stacked heads' rows with per-token scaling after it, the combination by column scaling of the
symmetric E_h, or the shift and scale folded into the Gram GEMM (operands [a x, -a c] and [x, 1], whose strided
fills cost more than the passes they save) measured the same or slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.blocking import Workspace
from .._core.numerics import rowdot
from .._summation.exact import _UNDERFLOW

__all__ = ["SharedHeads", "share_heads", "shared_heads"]

#: integer strength ratios taken as powers of E; above it (or for a ratio that is no integer) the head's own exp
MAX_POWER = 8
#: a ratio within this relative distance of an integer k is k (the ratio of two rounded strengths)
_RATIO_TOL = 4 * np.finfo(float).eps
#: the largest logit k_h a c of an unshifted pass (exp(300) and n of them summed are far from overflow)
SHIFT_ABOVE = 300.0


@dataclass(frozen=True)
class SharedHeads:
    """The plan of :func:`shared_heads`: the smallest strength ``base`` (:math:`m_0`), the distinct
    ratios :math:`k` (ascending, the first 1), the summed value weight of the heads of each ratio,
    and how each E is formed: ``("exp",)`` for the first, ``("mul", p, q)`` (the product of the E of
    ratios p and q, indices into ``ratios``), or ``("exp",)`` again for a ratio that is no power."""

    base: float
    ratios: tuple
    values: tuple
    recipe: tuple

    @property
    def n_exps(self) -> int:
        """Exponentials per (i, j) pair: the first E and every ratio that is no product of formed powers."""
        return sum(step[0] == "exp" for step in self.recipe)


def share_heads(heads, normalised: bool) -> SharedHeads | None:
    """The plan of scalar heads ``((m_h, w_h), ...)`` of a row-normalised kind, or None where the pass does
    not apply (one head, a kind whose output is no attention mean, a strength m_h <= 0)."""
    if not normalised or len(heads) < 2 or min(m for m, _ in heads) <= 0:
        return None
    base = min(m for m, _ in heads)
    ratios, values = [], []
    for m, w in heads:
        k = m / base
        k = float(round(k)) if abs(k - round(k)) <= _RATIO_TOL * k else k
        if k in ratios:
            values[ratios.index(k)] += w
        else:
            ratios.append(k)
            values.append(w)
    order = np.argsort(ratios, kind="stable")
    ratios, values = [ratios[i] for i in order], [values[i] for i in order]
    return SharedHeads(base, tuple(ratios), tuple(values), tuple(_recipe(ratios)))


def _recipe(ratios):
    """For each ratio: ("mul", p, q) with ratios[p] + ratios[q] equal to it (both formed before: the
    largest such p), else ("exp",)."""
    out = []
    for i, k in enumerate(ratios):
        pair = None
        if k == int(k) and k <= MAX_POWER:
            pair = next(((p, ratios.index(k - ratios[p])) for p in reversed(range(i))
                         if (k - ratios[p]) in ratios[:i]), None)
        out.append(("exp",) if pair is None else ("mul",) + pair)
    return out


def shared_heads(x: np.ndarray, beta: np.ndarray, plan: SharedHeads, work: Workspace, *, tangent: bool = False,
                 weights=None, unit: bool = False, out=None) -> np.ndarray | None:
    r"""The velocity :math:`\sum_h w_h\,\mathrm{diag}(Z_h)^{-1}E_hX` (projected with ``tangent``) of the
    heads of ``plan`` into ``out`` (module docstring), or None when a row sum underflows under the shift.

    Parameters
    ----------
    x : ndarray of shape (S, n, d)
        Tokens of S systems (sources and targets).
    beta : ndarray of shape (S,)
    plan : SharedHeads
    work : Workspace
    tangent : bool
        Project onto the tangent spaces, :math:`P_{x_i}v_i = v_i - \langle x_i, v_i\rangle x_i`.
    weights : ndarray of shape (S, n), optional
        Source masses :math:`w_j` (tokens standing for groups of coincident ones):
        :math:`Z_{h,i} = \sum_j E_{h,ij}w_j` and the sums of :math:`w_jx_j`.
    unit : bool
        The tokens have unit norm (c = 1, without a pass over the Gram diagonal).
    out : ndarray of shape (S, n, d), optional
    """
    S, n, d = x.shape
    H = len(plan.ratios)
    a = beta * plan.base
    E = work.get("shared_E", (H, S, n, n))
    one = (a == a[0]).all()  # one beta in the chunk (a phase diagram's cell): scalar operands, half the cost
    # a G from the GEMM of a x (an (S, n, d) pass, where scaling G is one over (S, n, n)) and x^T
    left = np.multiply(x, a[0] if one else a[:, None, None], out=work.get("shared_left", x.shape))
    right = work.get("right", (S, d, n))
    right[...] = x.transpose(0, 2, 1)
    G = np.matmul(left, right, out=E[0])
    # the shift a c, c = max_j |x_j|^2 (the row maxima's Cauchy-Schwarz bound), only where an exp could overflow:
    # the row normalisation cancels any factor of a row
    ac = (a[0] if one else a) if unit else np.diagonal(G, axis1=1, axis2=2).max(axis=1)
    if plan.ratios[-1] * np.max(ac) > SHIFT_ABOVE:
        G -= ac if np.ndim(ac) == 0 else ac[:, None, None]
    for h in range(1, H):
        if plan.recipe[h][0] == "exp":  # a ratio that is no power: its own exp of k a (G - sigma)
            np.exp(np.multiply(E[0], plan.ratios[h], out=E[h]), out=E[h])
    np.exp(E[0], out=E[0])
    for h, step in enumerate(plan.recipe):
        if step[0] == "mul":
            np.multiply(E[step[1]], E[step[2]], out=E[h])
    ones = np.ones((n, 1)) if weights is None else weights[:, :, None]
    z = np.matmul(E, ones, out=work.get("shared_z", (H, S, n, 1)))
    if not z.min() > _UNDERFLOW:
        return None
    coef = np.divide(np.asarray(plan.values)[:, None, None, None], z, out=z)
    # sum_h coef_h,i E_h,ij in one pass (H row scalings and H - 1 sums cost 1.6x as much)
    C = np.einsum("hsij,hsi->sij", E, coef[..., 0], out=work.get("shared_C", (S, n, n)))
    src = x if weights is None else np.multiply(x, weights[:, :, None], out=work.get("weighted", x.shape))
    f = np.matmul(C, src, out=work.get("sums", x.shape) if out is None else out)
    if tangent:
        f -= np.multiply(x, rowdot(x, f)[..., None], out=work.get("along", x.shape))
    return f
