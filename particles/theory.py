r"""Closed forms of docs/theory.md §3–§5 and the special token configurations they use.

Which kinds each result covers is stated in each docstring ("USA", "softmax", ...).

- Configurations: :func:`equiangular_tokens`, :func:`orthogonal_tokens`.
- Theorem 19: :func:`c_star`, :func:`beta_star`, :func:`cos_angle_orthogonal`.
- Equiangular reduction: :func:`equiangular_rhs`, :func:`solve_equiangular`,
  :func:`rho_beta0`, :func:`time_to_rho_beta0`, :func:`hitting_time`.
- Theorem 22: :func:`phi`, :func:`lambda_max`, :func:`lambda_c`, :func:`early_rate`,
  :func:`late_rate`, :func:`superadditivity_gain`.
- Theorem 25: :func:`relu_time_linear`, :func:`softmax_time_linear`.
- Theorem 27: :func:`entropy_equiangular`.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.special import lambertw

from .validation import InvalidParameterError, check_choice, check_param

__all__ = [
    "equiangular_tokens",
    "orthogonal_tokens",
    "mean_rho",
    "c_star",
    "beta_star",
    "cos_angle_orthogonal",
    "cos_angle_equiangular",
    "equiangular_rhs",
    "solve_equiangular",
    "rho_beta0",
    "time_to_rho_beta0",
    "hitting_time",
    "phi",
    "lambda_max",
    "lambda_c",
    "early_rate",
    "late_rate",
    "superadditivity_gain",
    "relu_time_linear",
    "softmax_time_linear",
    "entropy_equiangular",
    "EQUIANGULAR_KINDS",
]


def equiangular_tokens(n: int, rho: float, d: int | None = None) -> np.ndarray:
    r"""n unit vectors with :math:`\langle x_i, x_j\rangle = \rho` for i ≠ j, in R^d (d ≥ n).

    Rows of the Cholesky factor of the Gram matrix :math:`(1-\rho)I + \rho\mathbf 1\mathbf 1^\top`,
    padded with zeros to d columns. Needs :math:`-1/(n-1) < \rho < 1`.

    Examples
    --------
    >>> x = equiangular_tokens(3, 0.25)
    >>> float(np.round(x[0] @ x[1], 12))
    0.25
    """
    n = check_param(n, "n", "equiangular_tokens", low=2, integer=True)
    lo = -1.0 / (n - 1)
    rho = check_param(rho, "rho", "equiangular_tokens", low=lo, high=1.0, low_open=True, high_open=True)
    d = n if d is None else check_param(d, "d", "equiangular_tokens", low=n, integer=True)
    G = (1 - rho) * np.eye(n) + rho * np.ones((n, n))
    L = np.linalg.cholesky(G)
    x = np.zeros((n, d))
    x[:, :n] = L
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def orthogonal_tokens(n: int, d: int | None = None, rng=None) -> np.ndarray:
    """n orthonormal tokens in R^d (d ≥ n): the first n basis vectors, randomly rotated if ``rng``."""
    n = check_param(n, "n", "orthogonal_tokens", low=1, integer=True)
    d = n if d is None else check_param(d, "d", "orthogonal_tokens", low=n, integer=True)
    x = np.eye(d)[:n]
    if rng is not None:
        q, r = np.linalg.qr(np.random.default_rng(rng).standard_normal((d, d)))
        x = x @ (q * np.sign(np.diag(r))).T
    return x


def mean_rho(x) -> float:
    r"""Mean off-diagonal overlap :math:`\frac{2}{n(n-1)}\sum_{i<j}\langle x_i, x_j\rangle` (ρ of equiangular data)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    s = x.sum(axis=0)
    return float((s @ s - np.einsum("ij,ij->", x, x)) / (n * (n - 1)))


def c_star(H) -> float:
    r"""Theorem 19: :math:`c^*(H) = \frac{\sqrt{(H-1)^2+4}-(H-1)}{2}`, the root in (0, 1] of
    :math:`c^2 + (H-1)c = 1`. ``c_star(2)`` is 1/golden ratio.

    Examples
    --------
    >>> bool(round(1 / c_star(2), 12) == round((1 + 5 ** 0.5) / 2, 12))
    True
    """
    H = check_param(H, "H", "c_star", low=1)
    return (np.sqrt((H - 1) ** 2 + 4) - (H - 1)) / 2


def beta_star(H, n, alpha) -> float:
    r"""Theorem 19: critical inverse temperature for orthogonal tokens and H equal scalar
    heads of strength α (USA and softmax alike):
    :math:`\beta^* = \frac{1}{2\alpha}\ln\frac{c^{*2}(n-1)}{1-c^{*2}}`.

    Radial dominance holds iff β ≤ β*; at β* the cosine between :math:`f^h_i` and
    :math:`x_i` equals :math:`c^*(H)`. May be negative (then radial dominance fails at
    every β ≥ 0).
    """
    n = check_param(n, "n", "beta_star", low=2, integer=True)
    alpha = check_param(alpha, "alpha", "beta_star", low=0.0, low_open=True)
    c = c_star(H)
    if c >= 1.0:
        return np.inf  # H = 1: no other head casts a shadow
    return float(np.log(c * c * (n - 1) / (1 - c * c)) / (2 * alpha))


def cos_angle_orthogonal(beta, n, alpha) -> float:
    r""":math:`\cos\angle(f_i, x_i) = e^{\beta\alpha}/\sqrt{e^{2\beta\alpha} + n - 1}` for orthogonal
    tokens and a scalar head α (USA or softmax), computed stably."""
    ba = float(beta) * float(alpha)
    return float(1.0 / np.sqrt(1.0 + (n - 1) * np.exp(-2 * ba)))


def cos_angle_equiangular(rho, beta, n, alpha=1.0):
    r"""Softmax, equiangular tokens :math:`\langle x_i, x_j\rangle = \rho`, scalar head α:
    :math:`\cos\angle(f_i, x_i) = \frac{q + (1-q)\rho}{\sqrt{q^2 + 2q(1-q)\rho + (1-q)^2\frac{1+(n-2)\rho}{n-1}}}`
    with :math:`q = 1/(1 + (n-1)e^{-\beta\alpha(1-\rho)})` the token's weight on itself.
    At ρ = 0 this is :func:`cos_angle_orthogonal`; it is what Condition 8 compares with
    :math:`c^*(H)` for H equal heads.

    Examples
    --------
    >>> bool(np.isclose(cos_angle_equiangular(0.0, 1.0, 5), cos_angle_orthogonal(1.0, 5, 1.0)))
    True
    """
    rho = np.asarray(rho, dtype=np.float64)
    q = 1.0 / (1.0 + (n - 1) * np.exp(-float(beta) * float(alpha) * (1 - rho)))
    f2 = q * q + 2 * q * (1 - q) * rho + (1 - q) ** 2 * (1 + (n - 2) * rho) / (n - 1)
    return (q + (1 - q) * rho) / np.sqrt(f2)


#: kinds with an equiangular reduction
EQUIANGULAR_KINDS = ("usa", "softmax", "relu", "relu_rownorm")


def equiangular_rhs(rho, lambdas, beta, n, kind="softmax"):
    r"""Right-hand side :math:`\dot\rho` of the equiangular reduction (docs/theory.md §4).

    With :math:`p(\rho) = (1-\rho)((n-1)\rho+1)` and scalar heads :math:`\lambda_h`:

    - softmax: :math:`2p(\rho)\sum_h \lambda_h/(e^{\beta\lambda_h(1-\rho)} + n - 1)`
    - USA: :math:`\frac2n p(\rho)\sum_h \lambda_h e^{\beta\lambda_h\rho}`
    - ReLU: :math:`\frac2n p(\rho)\sum_h \lambda_h \mathrm{ReLU}(\beta\lambda_h\rho)`
    - row-normalised ReLU: :math:`2\rho(1-\rho)\sum_h\lambda_h` (the heads with
      :math:`\lambda_h\rho > 0`).
    """
    check_choice(kind, "kind", EQUIANGULAR_KINDS, "equiangular_rhs")
    lam = np.atleast_1d(np.asarray(lambdas, dtype=np.float64))
    rho = np.asarray(rho, dtype=np.float64)
    p = (1 - rho) * ((n - 1) * rho + 1)
    r = rho[..., None]
    if kind == "softmax":
        # λ / (e^{a} + n − 1) written as λ e^{−a}/(1 + (n−1)e^{−a}) when a > 0, to avoid overflow
        a = beta * lam * (1 - r)
        e = np.exp(-np.abs(a))
        term = np.where(a > 0, lam * e / (1 + (n - 1) * e), lam / (e + n - 1))
        return 2 * p * term.sum(-1)
    if kind == "usa":
        return (2 / n) * p * (lam * np.exp(beta * lam * r)).sum(-1)
    if kind == "relu":
        return (2 / n) * p * (lam * np.maximum(beta * lam * r, 0.0)).sum(-1)
    active = (lam * r > 0) & (beta > 0)
    return 2 * rho * (1 - rho) * np.where(active, lam, 0.0).sum(-1)


def solve_equiangular(rho0, ts, lambdas, beta, n, kind="softmax", rtol=1e-13, atol=1e-15):
    """Solve the equiangular ODE with scipy's DOP853; returns ρ at ``ts`` (ts[0] = start)."""
    ts = np.asarray(ts, dtype=np.float64)
    sol = solve_ivp(
        lambda t, y: equiangular_rhs(y, lambdas, beta, n, kind),
        (ts[0], ts[-1]), [float(rho0)], t_eval=ts, method="DOP853", rtol=rtol, atol=atol,
    )
    if not sol.success:  # pragma: no cover - DOP853 on a scalar smooth ODE
        raise RuntimeError(sol.message)
    return sol.y[0]


def rho_beta0(t, Lambda, n):
    r"""Softmax heads at β = 0 from :math:`\rho_0 = 0`:
    :math:`\rho(t) = (e^{2\Lambda t} - 1)/(e^{2\Lambda t} + n - 1)`, Λ = Σ_h λ_h."""
    e = np.exp(2 * Lambda * np.asarray(t, dtype=np.float64))
    return (e - 1) / (e + n - 1)


def time_to_rho_beta0(r, Lambda, n):
    r"""Time for softmax heads at β = 0 to go from ρ = 0 to ρ = r:
    :math:`\ln((1 + (n-1)r)/(1-r)) / (2\Lambda)`."""
    r = np.asarray(r, dtype=np.float64)
    return np.log((1 + (n - 1) * r) / (1 - r)) / (2 * Lambda)


def hitting_time(rho0, rho1, lambdas, beta, n, kind="softmax") -> float:
    r"""Time to go from ρ0 to ρ1 along the equiangular ODE: :math:`\int_{\rho_0}^{\rho_1} d\rho/\dot\rho`."""
    if not rho1 > rho0:
        raise InvalidParameterError(f"hitting_time needs rho1 > rho0; got rho0={rho0}, rho1={rho1}.")
    val, _ = quad(lambda r: 1.0 / float(equiangular_rhs(r, lambdas, beta, n, kind)), rho0, rho1,
                  limit=200, epsabs=0, epsrel=1e-12)
    return float(val)


def phi(lam, beta, n):
    r"""Theorem 22 (softmax): per-head early rate :math:`\varphi(\lambda) = 2\lambda/(e^{\lambda\beta} + n - 1)`,
    so that :math:`\dot\rho(0) = \sum_h\varphi(\lambda_h)` from orthogonal tokens."""
    lam = np.asarray(lam, dtype=np.float64)
    return 2 * lam / (np.exp(lam * beta) + n - 1)


def lambda_max(beta, n) -> float:
    r"""Maximiser of φ: :math:`\lambda_{max} = (1 + W_0((n-1)/e))/\beta` (Lambert W)."""
    beta = check_param(beta, "beta", "lambda_max", low=0.0, low_open=True)
    return float((1 + lambertw((n - 1) / np.e, 0).real) / beta)


def lambda_c(beta, n) -> float:
    r"""Inflection point of φ: φ is convex for λ > λ_c, where :math:`x = \lambda_c\beta` solves
    :math:`e^x(x-2) = (n-1)(x+2)` (the root x > 2)."""
    beta = check_param(beta, "beta", "lambda_c", low=0.0, low_open=True)
    g = lambda x: np.exp(x) * (x - 2) - (n - 1) * (x + 2)  # noqa: E731
    hi = 3.0
    while g(hi) <= 0:
        hi *= 2
    return float(brentq(g, 2.0, hi, xtol=1e-15, rtol=1e-15) / beta)


def early_rate(lambdas, beta, n) -> float:
    r"""Softmax :math:`\dot\rho(0) = \sum_h \varphi(\lambda_h)` from orthogonal tokens."""
    return float(np.sum(phi(np.asarray(lambdas, dtype=np.float64), beta, n)))


def superadditivity_gain(lambdas, beta, n) -> float:
    r"""Theorem 22: :math:`\sum_h\varphi(\lambda_h) - H\varphi(\Lambda/H)` (softmax, orthogonal start).

    Positive when the heads are spread inside the convex regime λ > λ_c (Jensen): the same
    total strength Λ split unequally clusters faster early on than split equally.
    """
    lam = np.atleast_1d(np.asarray(lambdas, dtype=np.float64))
    return float(np.sum(phi(lam, beta, n)) - lam.size * phi(lam.sum() / lam.size, beta, n))


def late_rate(lambdas) -> float:
    r"""Late-time rate 2Λ: :math:`1 - \rho \sim C e^{-2\Lambda t}` (softmax, Λ = Σλ_h)."""
    return 2.0 * float(np.sum(lambdas))


def relu_time_linear(rho0, lambdas, beta, n) -> float:
    r"""Theorem 25, ReLU linearised at ρ ≈ 0: :math:`T \approx n\log(1/\rho_0)/(2\beta\sum_h\lambda_h^2)`
    (time for ρ to grow from ρ0 to O(1))."""
    lam = np.asarray(lambdas, dtype=np.float64)
    return float(n * np.log(1.0 / rho0) / (2 * beta * np.sum(lam**2)))


def softmax_time_linear(lambdas, beta, n) -> float:
    r"""Theorem 25, softmax linearised at ρ = 0: :math:`T \approx 1/\dot\rho(0) = 1/\sum_h\varphi(\lambda_h)`,
    O(n) (time scale for ρ to grow by O(1) from 0)."""
    return 1.0 / early_rate(lambdas, beta, n)


def entropy_equiangular(rho, n, beta, lam):
    r"""Theorem 27, equiangular tokens, one scalar head λ (softmax weights):
    :math:`H(\rho) = -q\log q - (1-q)\log\frac{1-q}{n-1}`, :math:`q = 1/(1 + (n-1)e^{-\beta\lambda(1-\rho)})`.
    """
    rho = np.asarray(rho, dtype=np.float64)
    q = 1.0 / (1.0 + (n - 1) * np.exp(-beta * lam * (1 - rho)))
    with np.errstate(divide="ignore", invalid="ignore"):
        # q → 1 at large β: 0·log 0 is 0 by continuity
        t1 = np.where(q > 0, -q * np.log(q), 0.0)
        t2 = np.where(q < 1, -(1 - q) * np.log((1 - q) / (n - 1)), 0.0)
    return t1 + t2
