r"""Approximate orthogonality of heads (Theorems 39–40): per-head monotonicity that degrades with δ.

USA heads under Conditions 3 and 4 (:math:`M_h = M_h^\top = W_h`), head outputs
:math:`f^h_i = \sum_j e^{\beta s^h_{ij}} M_h x_j`, radial shadows :math:`a^h_i = \langle f^h_i, x_i\rangle`.
The per-head rates (Theorems 16–17) are exactly

.. math:: \frac{dE_h}{dt} = \frac1{n^3}\sum_i\Big[\|P_{x_i}f^h_i\|^2
          + \sum_{k\ne h}\big(\langle f^h_i, f^k_i\rangle - a^h_i a^k_i\big)\Big]
   \quad\text{(sphere; flat space: } \|f^h_i\|^2 + \sum_{k\ne h}\langle f^h_i, f^k_i\rangle).

Orthogonal heads (:math:`M_h M_k = 0`) have :math:`\langle f^h_i, f^k_i\rangle = 0`. For heads
that are only approximately orthogonal, measure the *orthogonality defect*

.. math:: \delta = \max_{h\ne k}\|M_h^\top M_k\|_{op},

and with :math:`S^h_i = \sum_j e^{\beta s^h_{ij}}`, :math:`|\langle M_h x_j, M_k x_l\rangle| \le \delta R^2`
(:math:`R = \max_j\|x_j\|`, 1 on the sphere) gives
:math:`|\langle f^h_i, f^k_i\rangle| \le \delta R^2 S^h_i S^k_i`. Hence the per-head rate bound

.. math:: \frac{dE_h}{dt} \ge \frac1{n^3}\sum_i\Big[\|P f^h_i\|^2 - a^h_i\sum_{k\ne h}a^k_i
          - \delta R^2 S^h_i\sum_{k\ne h}S^k_i\Big]
          \ge \frac1{n^3}\sum_i\Big[m^h_i - \delta R^2 S^h_i\sum_{k\ne h}S^k_i\Big],

with the radial-dominance margin :math:`m^h_i = \|Pf^h_i\|^2 - \|f^h_i\|\sum_{k\ne h}|a^k_i|`
(Condition 8). Both bounds are continuous in δ and the first is exact at δ = 0; per-head
monotonicity survives wherever :math:`m^h_i \ge \delta S^h_i\sum_{k\ne h}S^k_i` for every token
(``certified``). Quantities of USA models with ``log_time_scale = c`` are in the units of
:func:`particles.diagnose` (:math:`f, S` times :math:`e^{-c}`, rates times :math:`e^{-2c}`).

References
----------
arXiv:2605.04279, Theorems 16–17 and 39–40.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._core.arrays import check_square_stack
from .._core.declarations import declare
from .._core.params import AnyOf
from .._core.params_data import SquareStack
from .._model.checks import Model, check_model, fits_model
from .._model.fields import STATE
from .._model.multihead import MultiHead
from .diagnostics import diagnose
from .shadows import radial_parts

__all__ = ["orthogonality_defect", "head_rate_bounds", "head_rate_bounds_fn"]


@declare(M=AnyOf(Model(), SquareStack()))
def orthogonality_defect(M) -> float:
    r""":math:`\delta = \max_{h\ne k}\|M_h^\top M_k\|_{op}` of a stack of score matrices (0 for one head).

    ``M`` is an array of shape (H, d, d) or a :class:`MultiHead` (its ``M``).

    Examples
    --------
    >>> orthogonality_defect(np.array([np.diag([1.0, 0.0]), np.diag([0.0, 2.0])]))
    0.0
    """
    M = M.M if isinstance(M, MultiHead) else check_square_stack(M, "M", caller="orthogonality_defect")
    H = M.shape[0]
    best = 0.0
    for h in range(H):
        for k in range(h + 1, H):
            # ‖M_kᵀM_h‖ = ‖(M_hᵀM_k)ᵀ‖: one norm per unordered pair
            best = max(best, float(np.linalg.norm(M[h].T @ M[k], 2)))
    return best


def _check(model, caller):
    check_model(model, caller, kinds=("usa",), symmetric=True,
                aligned="for W_h = M_h + Delta_h use particles.misalignment_rates.")


@declare(model=Model(kinds=("usa",), symmetric=True), x=STATE, relations=[fits_model()])
def head_rate_bounds(model: MultiHead, x) -> dict:
    r"""Exact per-head rates and the Theorem 39–40 lower bounds at state ``x``.

    Parameters
    ----------
    model : MultiHead
        USA heads with :math:`M_h = M_h^\top = W_h`.
    x : ndarray of shape (n, d)

    Returns
    -------
    dict
        ``delta`` (float), ``rate`` (H,) the exact :math:`dE_h/dt` (from
        :func:`particles.diagnose`), ``orthogonal_part`` (H,) the rate with the
        :math:`\langle f^h, f^k\rangle` terms dropped, ``bound`` (H,) and ``rd_bound`` (H,) the two
        bounds of the module docstring, ``margin`` (H, n)
        :math:`m^h_i - \delta R^2 S^h_i\sum_{k\ne h}S^k_i`, ``certified`` (H,) 1 where every
        token's margin is >= 0, ``partition`` (H, n) :math:`S^h_i`. Always
        ``rate >= bound >= rd_bound``; ``|rate - orthogonal_part| <= orthogonal_part - bound``.

    Notes
    -----
    :math:`S^h_i` comes from the dense scores (O(H n²) memory): for small n.

    Examples
    --------
    >>> M = np.array([np.diag([1.0, 1.0, 0.0, 0.0]), np.diag([0.0, 0.0, 1.0, 1.0])])
    >>> out = head_rate_bounds(MultiHead(M, beta=1.0), np.eye(4))
    >>> out["delta"], bool(np.allclose(out["rate"], out["bound"]))
    (0.0, True)
    """
    _check(model, "head_rate_bounds")
    return _bounds(model, model.check_x(x))


def _bounds(model: MultiHead, x: np.ndarray) -> dict:
    n = x.shape[0]
    delta = orthogonality_defect(model.M)
    R2 = 1.0 if model.geom.on_sphere else float(np.max(np.einsum("ij,ij->i", x, x)))
    r = radial_parts(model.head_outputs(x), x)
    if model.geom.on_sphere:
        own, rd = r.tangential2, r.margin
        shadow = r.shadow * (r.shadow.sum(axis=0)[None] - r.shadow)
    else:
        own, shadow, rd = r.norm2, np.zeros_like(r.norm2), r.norm2
    S = np.exp(logsumexp(model.beta * model.scores(x), axis=-1) - model.log_time_scale)
    slack = delta * R2 * S * (S.sum(axis=0)[None] - S)
    rate = diagnose(model, x, include=["head_energy_rate"])["head_energy_rate"]
    margin = rd - slack
    return {
        "delta": delta,
        "rate": rate,
        "orthogonal_part": (own - shadow).sum(axis=1) / n**3,
        "bound": (own - shadow - slack).sum(axis=1) / n**3,
        "rd_bound": margin.sum(axis=1) / n**3,
        "margin": margin,
        "certified": (margin.min(axis=1) >= 0).astype(int),
        "partition": S,
    }


@declare(model=Model(kinds=("usa",), symmetric=True))
def head_rate_bounds_fn(model: MultiHead):
    """A ``save_fn(t, x) -> dict`` computing :func:`head_rate_bounds` (for ``SaveAt(fn=...)``)."""
    _check(model, "head_rate_bounds_fn")

    def save_fn(t, x):
        return _bounds(model, x)

    return save_fn
