r"""Closed forms of docs/theory.md §3–§5 and the special token configurations they use.

Which kinds each result covers is stated in each docstring ("USA", "softmax", ...).

One order: the variable by position (ρ, t, r, λ, H or β; a span: ``rho0, rho1`` or ``rho0, ts``), then
by keyword only the head strengths (``lambdas``, ``Lambda`` = Σ_h λ_h, ``lam`` or ``alpha``), ``beta``,
``n`` and the options: ``beta_star(3, alpha=0.7, n=16)``, ``rho_beta0(t, Lambda=2, n=8)``. By position
the numbers are easily swapped (``beta_star(16, 3, 0.7)`` exchanges n and H); a call in the order of
earlier releases works, with a ``DeprecationWarning`` that writes it with keywords.

- Configurations (from :mod:`particles._core.configurations`): :func:`equiangular_tokens`,
  :func:`orthogonal_tokens`, :func:`mean_rho`.
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
from scipy.special import expit, lambertw

from ._core.configurations import equiangular_tokens, mean_rho, orthogonal_tokens
from ._core.declarations import Relation, declare
from ._core.keywords import keyword_only
from ._core.params import Integer, Interval, Options
from ._core.params_data import Array
from ._core.validation import InvalidParameterError, SolverError

__all__ = [
    "equiangular_tokens", "orthogonal_tokens", "mean_rho", "c_star", "beta_star", "cos_angle_orthogonal",
    "cos_angle_equiangular", "equiangular_rhs", "solve_equiangular", "rho_beta0", "time_to_rho_beta0",
    "hitting_time", "phi", "lambda_max", "lambda_c", "early_rate", "late_rate", "superadditivity_gain",
    "relu_time_linear", "softmax_time_linear", "entropy_equiangular", "EQUIANGULAR_KINDS",
]

def _p(rho, n):
    return (1 - rho) * ((n - 1) * rho + 1)


def _softmax_rhs(rho, r, lam, beta, n):
    # λ / (e^{a} + n − 1) written as λ e^{−a}/(1 + (n−1)e^{−a}) when a > 0, to avoid overflow
    a = beta * lam * (1 - r)
    e = np.exp(-np.abs(a))
    term = np.where(a > 0, lam * e / (1 + (n - 1) * e), lam / (e + n - 1))
    return 2 * _p(rho, n) * term.sum(-1)


def _rownorm_rhs(rho, r, lam, beta, n):
    active = (lam * r > 0) & (beta > 0)
    return 2 * rho * (1 - rho) * np.where(active, lam, 0.0).sum(-1)


#: the equiangular right-hand side dρ/dt of each kind that has one, (ρ, ρ[..., None], λ, β, n) -> (...)
#: (:func:`equiangular_rhs`): the closed forms are facts of each kind, so they are looked up, not compared
_EQUIANGULAR = {
    "usa": lambda rho, r, lam, beta, n: (2 / n) * _p(rho, n) * (lam * np.exp(beta * lam * r)).sum(-1),
    "softmax": _softmax_rhs,
    "relu": lambda rho, r, lam, beta, n: (2 / n) * _p(rho, n) * (lam * np.maximum(beta * lam * r, 0.0)).sum(-1),
    "relu_rownorm": _rownorm_rhs,
}

#: kinds with an equiangular reduction
EQUIANGULAR_KINDS = tuple(_EQUIANGULAR)

# the rules of the quantities the closed forms share, written once
_N = Integer(2, hint="n is the number of tokens.")
_BETA = Interval(0, hint="beta is the inverse temperature, >= 0.")
_POS = Interval(0, None, closed="neither")
_NONNEG = Interval(0)
_REAL = Interval()
_LAMBDAS = Array((0, 1), what="a non-empty 1-D sequence of head strengths")
_KIND = Options(*EQUIANGULAR_KINDS)
_HEADS = {"lambdas": _LAMBDAS, "beta": _BETA, "n": _N}


def _overlap_ok(rho, n) -> bool:
    """An overlap of n equiangular unit vectors: -1/(n-1) < rho <= 1."""
    return -1.0 / (n - 1) < rho <= 1.0


def _overlap(name: str) -> Relation:
    return Relation((name, "n"), _overlap_ok, "must lie in (-1/(n-1), 1] (n equiangular unit vectors)",
                    breaks={name: -0.5, "n": 4})


@declare(H=Interval(1, hint="H is the number of heads, >= 1."))
def c_star(H) -> float:
    r"""Theorem 19: :math:`c^*(H) = \frac{\sqrt{(H-1)^2+4}-(H-1)}{2}`, the root in (0, 1] of
    :math:`c^2 + (H-1)c = 1`. ``c_star(2)`` is 1/golden ratio.

    Examples
    --------
    >>> bool(round(1 / c_star(2), 12) == round((1 + 5 ** 0.5) / 2, 12))
    True
    """
    return (np.sqrt((H - 1) ** 2 + 4) - (H - 1)) / 2


@keyword_only("n", "alpha")
@declare(H=Interval(1), n=_N, alpha=_POS)
def beta_star(H, *, alpha, n) -> float:
    r"""Theorem 19: critical inverse temperature for orthogonal tokens and H equal scalar
    heads of strength α (USA and softmax alike):
    :math:`\beta^* = \frac{1}{2\alpha}\ln\frac{c^{*2}(n-1)}{1-c^{*2}}`.

    Radial dominance holds iff β ≤ β*; at β* the cosine between :math:`f^h_i` and
    :math:`x_i` equals :math:`c^*(H)`. May be negative (then radial dominance fails at
    every β ≥ 0).
    """
    c = c_star(H)
    if c >= 1.0:
        return np.inf  # H = 1: no other head casts a shadow
    return float(np.log(c * c * (n - 1) / (1 - c * c)) / (2 * alpha))


@keyword_only("n", "alpha")
@declare(beta=_BETA, n=Integer(1), alpha=_NONNEG)
def cos_angle_orthogonal(beta, *, alpha, n) -> float:
    r""":math:`\cos\angle(f_i, x_i) = e^{\beta\alpha}/\sqrt{e^{2\beta\alpha} + n - 1}` for orthogonal
    tokens and a scalar head α (USA or softmax), computed stably."""
    return float(1.0 / np.sqrt(1.0 + (n - 1) * np.exp(-2 * beta * alpha)))


@keyword_only("beta", "n", "alpha")
@declare(rho=Array(), beta=_BETA, n=_N, alpha=_NONNEG)
def cos_angle_equiangular(rho, *, alpha=1.0, beta, n):
    r"""Softmax, equiangular tokens :math:`\langle x_i, x_j\rangle = \rho`, scalar head α:
    :math:`\cos\angle(f_i, x_i) = \frac{q + (1-q)\rho}{\sqrt{q^2 + 2q(1-q)\rho + (1-q)^2\frac{1+(n-2)\rho}{n-1}}}`
    with :math:`q = 1/(1 + (n-1)e^{-\beta\alpha(1-\rho)})` the token's weight on itself.
    At ρ = 0 this is :func:`cos_angle_orthogonal`; it is what Condition 8 compares with
    :math:`c^*(H)` for H equal heads.

    Examples
    --------
    >>> bool(np.isclose(cos_angle_equiangular(0.0, beta=1.0, n=5), cos_angle_orthogonal(1.0, alpha=1.0, n=5)))
    True
    """
    _check_rho_range(rho, n, "cos_angle_equiangular")
    q = 1.0 / (1.0 + (n - 1) * np.exp(-float(beta) * float(alpha) * (1 - rho)))
    f2 = q * q + 2 * q * (1 - q) * rho + (1 - q) ** 2 * (1 + (n - 2) * rho) / (n - 1)
    return (q + (1 - q) * rho) / np.sqrt(f2)



@keyword_only("lambdas", "beta", "n", "kind")
@declare(rho=Array(), kind=_KIND, **_HEADS)
def equiangular_rhs(rho, *, lambdas, beta, n, kind="softmax"):
    r"""Right-hand side :math:`\dot\rho` of the equiangular reduction (docs/theory.md §4).

    With :math:`p(\rho) = (1-\rho)((n-1)\rho+1)` and scalar heads :math:`\lambda_h`:

    - softmax: :math:`2p(\rho)\sum_h \lambda_h/(e^{\beta\lambda_h(1-\rho)} + n - 1)`
    - USA: :math:`\frac2n p(\rho)\sum_h \lambda_h e^{\beta\lambda_h\rho}`
    - ReLU: :math:`\frac2n p(\rho)\sum_h \lambda_h \mathrm{ReLU}(\beta\lambda_h\rho)`
    - row-normalised ReLU: :math:`2\rho(1-\rho)\sum_h\lambda_h` (the heads with
      :math:`\lambda_h\rho > 0`).
    """
    _check_rho_range(rho, n, "equiangular_rhs")
    return _equiangular_rhs(rho, np.atleast_1d(lambdas), beta, n, kind)


def _equiangular_rhs(rho, lam, beta, n, kind):
    """The right-hand side for validated arguments (an ODE solver's trial stage may step past ρ = 1)."""
    return _EQUIANGULAR[kind](rho, rho[..., None], lam, beta, n)


@keyword_only("lambdas", "beta", "n", "kind", "rtol", "atol")
@declare(rho0=_REAL, ts=Array(1, min_size=2, what="a 1-D array of at least 2 times"), kind=_KIND, rtol=_POS,
         atol=_POS, **_HEADS, relations=[_overlap("rho0")])
def solve_equiangular(rho0, ts, *, lambdas, beta, n, kind="softmax", rtol=1e-13, atol=1e-15):
    """Solve the equiangular ODE with scipy's DOP853; returns ρ at ``ts`` (ts[0] = start)."""
    caller = "solve_equiangular"
    lam = np.atleast_1d(lambdas)
    if np.any(np.diff(ts) <= 0):
        raise InvalidParameterError(f"ts of {caller} must be strictly increasing; got {ts.tolist()[:6]}.")
    sol = solve_ivp(
        lambda t, y: _equiangular_rhs(y, lam, beta, n, kind),
        (ts[0], ts[-1]), [float(rho0)], t_eval=ts, method="DOP853", rtol=rtol, atol=atol,
    )
    if not sol.success:  # pragma: no cover - DOP853 on a scalar smooth ODE
        raise SolverError(f"solve_equiangular: DOP853 failed ({sol.message}); lower beta or loosen rtol.")
    return sol.y[0]


@keyword_only("Lambda", "n")
@declare(t=Array(), Lambda=_REAL, n=Integer(1))
def rho_beta0(t, *, Lambda, n):
    r"""Softmax heads at β = 0 from :math:`\rho_0 = 0`:
    :math:`\rho(t) = (e^{2\Lambda t} - 1)/(e^{2\Lambda t} + n - 1)`, Λ = Σ_h λ_h."""
    with np.errstate(over="ignore", invalid="ignore"):
        # e^{2Λt} → inf: ρ → 1, the limit of the closed form
        e = np.exp(2 * Lambda * t)
        out = (e - 1) / (e + n - 1)
    return np.where(np.isinf(e), 1.0, out)


@keyword_only("Lambda", "n")
@declare(r=Array(), Lambda=_POS, n=Integer(1))
def time_to_rho_beta0(r, *, Lambda, n):
    r"""Time for softmax heads at β = 0 to go from ρ = 0 to ρ = r:
    :math:`\ln((1 + (n-1)r)/(1-r)) / (2\Lambda)`."""
    caller = "time_to_rho_beta0"
    if np.any((r < 0) | (r >= 1)):
        raise InvalidParameterError(f"r of {caller} must lie in [0, 1) (ρ = 1 is reached only as t → inf).")
    return np.log((1 + (n - 1) * r) / (1 - r)) / (2 * Lambda)


@keyword_only("lambdas", "beta", "n", "kind")
@declare(rho0=_REAL, rho1=_REAL, kind=_KIND, **_HEADS, relations=[_overlap("rho0"), _overlap("rho1")])
def hitting_time(rho0, rho1, *, lambdas, beta, n, kind="softmax") -> float:
    r"""Time to go from ρ0 to ρ1 along the equiangular ODE: :math:`\int_{\rho_0}^{\rho_1} d\rho/\dot\rho`."""
    lam = np.atleast_1d(lambdas)
    if not rho1 > rho0 or rho1 >= 1.0:
        raise InvalidParameterError(
            f"hitting_time needs rho0 < rho1 < 1 (ρ = 1 is reached only as t → inf); got rho0={rho0}, rho1={rho1}."
        )
    probe = equiangular_rhs(np.linspace(rho0, rho1, 65), lambdas=lam, beta=beta, n=n, kind=kind)
    if not np.all(probe > 0):
        raise InvalidParameterError(
            f"the equiangular flow ({kind}, lambdas={lam.tolist()}, beta={beta:g}) does not increase rho on "
            f"[{rho0:g}, {rho1:g}] (its rate is <= 0 there), so rho1 is never reached; use positive lambdas."
        )
    val, _ = quad(lambda r: 1.0 / float(_equiangular_rhs(np.asarray(r, dtype=float), lam, beta, n, kind)), rho0, rho1,
                  limit=200, epsabs=0, epsrel=1e-12)
    return float(val)


@keyword_only("beta", "n")
@declare(lam=Array(), beta=_BETA, n=Integer(1))
def phi(lam, *, beta, n):
    r"""Theorem 22 (softmax): per-head early rate :math:`\varphi(\lambda) = 2\lambda/(e^{\lambda\beta} + n - 1)`,
    so that :math:`\dot\rho(0) = \sum_h\varphi(\lambda_h)` from orthogonal tokens."""
    return _phi(lam, beta, n)


def _phi(lam, beta, n):
    # 2λ/(e^a + n − 1) written as 2λ e^{−a}/(1 + (n−1)e^{−a}) when a = λβ > 0 (no overflow)
    a = lam * beta
    e = np.exp(-np.abs(a))
    return np.where(a > 0, 2 * lam * e / (1 + (n - 1) * e), 2 * lam / (e + n - 1))


@keyword_only("n")
@declare(beta=_POS, n=Integer(1))
def lambda_max(beta, *, n) -> float:
    r"""Maximiser of φ: :math:`\lambda_{max} = (1 + W_0((n-1)/e))/\beta` (Lambert W)."""
    return float((1 + lambertw((n - 1) / np.e, 0).real) / beta)


@keyword_only("n")
@declare(beta=_POS, n=_N)
def lambda_c(beta, *, n) -> float:
    r"""Inflection point of φ: φ is convex for λ > λ_c, where :math:`x = \lambda_c\beta` solves
    :math:`e^x(x-2) = (n-1)(x+2)` (the root x > 2)."""
    # in logs, x + log(x − 2) = log(n − 1) + log(x + 2): no overflow for any n
    g = lambda x: x + np.log(x - 2) - np.log(n - 1) - np.log(x + 2)  # noqa: E731
    hi = 3.0
    while g(hi) <= 0:
        hi *= 2
    return float(brentq(g, 2.0 + 1e-12, hi, xtol=1e-15, rtol=1e-15) / beta)


@keyword_only("beta", "n")
@declare(**_HEADS)
def early_rate(lambdas, *, beta, n) -> float:
    r"""Softmax :math:`\dot\rho(0) = \sum_h \varphi(\lambda_h)` from orthogonal tokens."""
    return float(np.sum(_phi(np.atleast_1d(lambdas), beta, n)))


@keyword_only("beta", "n")
@declare(**_HEADS)
def superadditivity_gain(lambdas, *, beta, n) -> float:
    r"""Theorem 22: :math:`\sum_h\varphi(\lambda_h) - H\varphi(\Lambda/H)` (softmax, orthogonal start).

    Positive when the heads are spread inside the convex regime λ > λ_c (Jensen): the same
    total strength Λ split unequally clusters faster early on than split equally.
    """
    lam = np.atleast_1d(lambdas)
    return float(np.sum(_phi(lam, beta, n)) - lam.size * _phi(lam.sum() / lam.size, beta, n))


@declare(lambdas=_LAMBDAS)
def late_rate(lambdas) -> float:
    r"""Late-time rate 2Λ: :math:`1 - \rho \sim C e^{-2\Lambda t}` (softmax, Λ = Σλ_h)."""
    return 2.0 * float(np.sum(lambdas))


@keyword_only("lambdas", "beta", "n")
@declare(rho0=Interval(0, 1, closed="neither"), **_HEADS)
def relu_time_linear(rho0, *, lambdas, beta, n) -> float:
    r"""Theorem 25, ReLU linearised at ρ ≈ 0: :math:`T \approx n\log(1/\rho_0)/(2\beta\sum_h\lambda_h^2)`
    (time for ρ to grow from ρ0 to O(1))."""
    caller = "relu_time_linear"
    lam = np.atleast_1d(lambdas)
    if beta == 0 or not np.any(lam != 0):
        raise InvalidParameterError(f"{caller} needs beta > 0 and a nonzero head (the ReLU flow is frozen otherwise).")
    return float(n * np.log(1.0 / rho0) / (2 * beta * np.sum(lam**2)))


@keyword_only("beta", "n")
@declare(**_HEADS)
def softmax_time_linear(lambdas, *, beta, n) -> float:
    r"""Theorem 25, softmax linearised at ρ = 0: :math:`T \approx 1/\dot\rho(0) = 1/\sum_h\varphi(\lambda_h)`,
    O(n) (time scale for ρ to grow by O(1) from 0)."""
    rate = early_rate(lambdas, beta=beta, n=n)
    if not rate > 0:
        raise InvalidParameterError(
            f"softmax_time_linear needs a positive early rate sum_h phi(lambda_h); got {rate:g}. Use positive lambdas."
        )
    return 1.0 / rate


@keyword_only("n", "beta", "lam")
@declare(rho=Array(), lam=_REAL, beta=_BETA, n=_N)
def entropy_equiangular(rho, *, lam, beta, n):
    r"""Theorem 27, equiangular tokens, one scalar head λ (softmax weights):
    :math:`H(\rho) = -q\log q - (1-q)\log\frac{1-q}{n-1}`, :math:`q = 1/(1 + (n-1)e^{-\beta\lambda(1-\rho)})`.
    """
    caller = "entropy_equiangular"
    _check_rho_range(rho, n, caller)
    q = expit(beta * lam * (1 - rho) - np.log(n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        # q → 1 at large β: 0·log 0 is 0 by continuity
        t1 = np.where(q > 0, -q * np.log(q), 0.0)
        t2 = np.where(q < 1, -(1 - q) * np.log((1 - q) / (n - 1)), 0.0)
    return t1 + t2


def _check_rho_range(rho: np.ndarray, n: int, caller: str) -> None:
    """Overlaps of n equiangular unit vectors lie in [−1/(n−1), 1] (up to round-off)."""
    if np.any(rho < -1.0 / (n - 1) - 1e-12) or np.any(rho > 1.0 + 1e-12):
        raise InvalidParameterError(
            f"rho of {caller} must lie in [-1/(n-1), 1] = [{-1.0 / (n - 1):.4g}, 1] (the Gram matrix of n "
            f"equiangular unit vectors is positive semi-definite only there); got range "
            f"[{rho.min():.4g}, {rho.max():.4g}]."
        )
