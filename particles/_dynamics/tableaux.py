"""Coefficients and helpers shared by the steppers of :mod:`~particles._dynamics.steppers` and
:mod:`~particles._dynamics.per_system`: the Dormand–Prince 5(4) tableau (:data:`DORMAND_PRINCE`,
public in :mod:`particles.extend`), the Runge–Kutta–Chebyshev recursion and stage count, and a
nonlinear power iteration for the spectral radius of a field's Jacobian."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

__all__ = ["ButcherTableau", "DORMAND_PRINCE", "DP_DENSE", "RKC_MAX_STAGES", "dp_dense", "rkc_stages"]


@dataclass(frozen=True, eq=False)
class ButcherTableau:
    r"""An explicit embedded Runge–Kutta pair: stage s is evaluated at :math:`t + c_s h` on
    :math:`x + h\sum_{j<s} a_{sj}k_j`; the solution is :math:`x + h\sum_s b_sk_s` (order ``order``)
    and :math:`h\sum_s e_sk_s` its error estimate, the difference to the embedded solution
    (order ``error_order``). ``a`` holds the rows as lists (row s has s entries), ``matrix`` the
    same rows zero-padded to a square array."""

    name: str
    c: np.ndarray
    a: tuple
    b: np.ndarray
    b_embedded: np.ndarray
    order: int
    error_order: int
    matrix: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        s = len(self.c)
        object.__setattr__(self, "matrix", np.array([list(row) + [0.0] * (s - len(row)) for row in self.a]))

    @property
    def e(self) -> np.ndarray:
        """The error weights b - b_embedded."""
        return self.b - self.b_embedded

    @property
    def stages(self) -> int:
        return len(self.c)


#: the Dormand–Prince 5(4) pair (Dormand & Prince 1980), first same as last: its last row is b
DORMAND_PRINCE = ButcherTableau(
    "dormand_prince",
    c=np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]),
    a=(
        (),
        (1 / 5,),
        (3 / 40, 9 / 40),
        (44 / 45, -56 / 15, 32 / 9),
        (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
        (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
        (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
    ),
    b=np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]),
    b_embedded=np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]),
    order=5,
    error_order=4,
)


def dp_stages(f, x, h, k1, time):
    r"""The Dormand–Prince 5(4) step from x with step h (a float, or an array broadcasting per
    system) and first stage k1: the fifth-order solution, the embedded difference
    :math:`h\sum_i e_ik_i` and the stages (an array (7, *x.shape); the last one is f at the new
    point: first same as last). ``time(c)`` is the time of the stage at fraction c of the step.

    The stages live in one array, so each combination :math:`x + h\sum_j a_{sj}k_j` is one
    matrix-vector pass over them and two in-place updates (a sum of scaled temporaries costs
    about ten passes, more than the evaluations themselves for small batched systems)."""
    tab = DORMAND_PRINCE
    K = np.empty((7,) + x.shape, dtype=np.result_type(x, k1))
    K[0] = k1
    flat = K.reshape(7, -1)

    def combine(coef, s):
        out = (coef[:s] @ flat[:s]).reshape(x.shape)
        out *= h
        return out

    for s in range(1, 7):
        stage = combine(tab.matrix[s], s)
        stage += x
        K[s] = f(time(tab.c[s]), stage)
    y5 = combine(tab.b, 7)
    y5 += x
    return y5, combine(tab.e, 7), K


#: Shampine's quartic interpolant of the Dormand–Prince step (the dense output of scipy's RK45 and
#: Hairer's DOPRI5): y(t0 + θh) = y0 + h Σ_i K_i (P_i · [θ, θ², θ³, θ⁴])
DP_DENSE = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])


def dp_dense(x, h, K):
    """The continuous extension of one Dormand–Prince step from x with step h and stages K (as
    :func:`dp_stages` returns them): ``(theta, idx=None) -> y(t + theta h)`` in ambient space (of the
    systems ``idx`` of a stack alone when given), y(1) the step's solution."""

    def at(theta, idx=None):
        xs, Ks = (x, K) if idx is None else (x[idx], K[:, idx])
        b = DP_DENSE @ np.array([theta, theta**2, theta**3, theta**4])
        return xs + h * (b @ Ks.reshape(7, -1)).reshape(xs.shape)

    return at


def onto(geom, y):
    """An adaptive step's new state y on the manifold: retracted (normalised) on the sphere, as is
    in flat space (the increment is already in y)."""
    return geom.retract(y, np.zeros_like(y)) if geom.on_sphere else y


def scaled_rms(e, x, y, rtol, atol, axis=None):
    """The adaptive steppers' error norm: the RMS of e scaled by ``atol + rtol·max(|x|, |y|)``
    (over ``axis``; all entries by default)."""
    return np.sqrt(np.mean((e / (atol + rtol * np.maximum(np.abs(x), np.abs(y)))) ** 2, axis=axis))


#: RKC damping (Sommeijer, Shampine & Verwer 1997): the stability interval is [-0.653 s², 0]
_RKC_DAMPING = 2.0 / 13.0
#: most stages per step; a trial step that needs more is rejected (the controller shortens it)
RKC_MAX_STAGES = 500


@cache
def _rkc_coefficients(s: int):
    r"""Coefficients of the s-stage second-order RKC step (Verwer, Hundsdorfer & Sommeijer 1990):
    :math:`w_0 = 1 + \epsilon/s^2`, :math:`w_1 = T_s'(w_0)/T_s''(w_0)`, :math:`b_j =
    T_j''(w_0)/T_j'(w_0)^2` (:math:`b_0 = b_1 = b_2`), :math:`a_j = 1 - b_jT_j(w_0)`; stage j >= 2 is
    :math:`Y_j = (1-\mu_j-\nu_j)Y_0 + \mu_jY_{j-1} + \nu_jY_{j-2} + \tilde\mu_j hF(Y_{j-1}) +
    \tilde\gamma_j hF(Y_0)` with :math:`\mu_j = 2b_jw_0/b_{j-1}`, :math:`\nu_j = -b_j/b_{j-2}`,
    :math:`\tilde\mu_j = 2b_jw_1/b_{j-1}`, :math:`\tilde\gamma_j = -a_{j-1}\tilde\mu_j`; the stage
    times c_j follow the same recursion for y' = 1. Returns (mu~_1, rows (mu, nu, mu~, gamma~, c_{j-1})).
    """
    w0 = 1.0 + _RKC_DAMPING / s**2
    T, dT, d2T = np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1)
    T[0], T[1], dT[1] = 1.0, w0, 1.0
    for j in range(2, s + 1):
        T[j] = 2 * w0 * T[j - 1] - T[j - 2]
        dT[j] = 2 * T[j - 1] + 2 * w0 * dT[j - 1] - dT[j - 2]
        d2T[j] = 4 * dT[j - 1] + 2 * w0 * d2T[j - 1] - d2T[j - 2]
    w1 = dT[s] / d2T[s]
    b = np.empty(s + 1)
    b[2:] = d2T[2:] / dT[2:] ** 2
    b[0] = b[1] = b[2]
    a = 1.0 - b * T
    mu1 = b[1] * w1
    c = [0.0, mu1]
    rows = []
    for j in range(2, s + 1):
        mu, nu, mut = 2 * b[j] * w0 / b[j - 1], -b[j] / b[j - 2], 2 * b[j] * w1 / b[j - 1]
        gam = -a[j - 1] * mut
        rows.append((mu, nu, mut, gam, c[j - 1]))
        c.append(mu * c[j - 1] + nu * c[j - 2] + mut + gam)
    return mu1, tuple(rows)


def rkc_stages(h_rho: float) -> int:
    """Stages the RKC step needs for stability when h times the spectral radius is ``h_rho``:
    the smallest s >= 2 with 0.653 s² >= h ρ (with a stage of margin, as the RKC code)."""
    return max(2, 1 + int(np.sqrt(1.54 * h_rho + 1.0)))


def _power_radius(field, t, x, f0, iters: int = 20) -> float:
    """Spectral radius of the field's Jacobian at x by nonlinear power iteration (the RKC code's
    fallback): z <- F(x + δz) - F(x), |Δ F| / (δ|z|) -> ρ; times 1.2 for the estimate's shortfall."""
    z = f0 if np.any(f0) else np.sin(np.arange(x.size, dtype=float)).reshape(x.shape)
    xn = float(np.sqrt(np.sum(x * x)))
    est = 0.0
    for _ in range(iters):
        zn = float(np.sqrt(np.sum(z * z)))
        if zn == 0.0:
            break
        delta = np.sqrt(np.finfo(float).eps) * max(1.0, xn) / zn
        z = field(t, x + delta * z) - f0
        new = float(np.sqrt(np.sum(z * z))) / (delta * zn)
        if abs(new - est) <= 0.01 * new:
            est = new
            break
        est = new
    return 1.2 * est
