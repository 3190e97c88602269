r"""Linear stability of the uniform measure on :math:`S^{d-1}` (scalar heads, with or without noise).

Heads :math:`M_h = \lambda_h I`, :math:`W_h = \mu_h I` (the interaction depends on
:math:`\langle x, y\rangle` only), :math:`a_h = \beta\lambda_h`, σ the normalised uniform measure,
:math:`\nu = (d-2)/2`. The velocity is a sphere gradient, :math:`v[\mu] = \nabla_S\Phi[\mu]` with
:math:`\Phi = \sum_h\frac{\mu_h}{a_h}\int e^{a_h\langle x,y\rangle}d\mu(y)` (USA) or
:math:`\sum_h\frac{\mu_h}{a_h}\log\int e^{a_h\langle x,y\rangle}d\mu(y)` (softmax), and
:math:`v[\sigma] = 0`. By the Funk–Hecke formula a spherical harmonic :math:`Y_l` of degree l is an
eigenfunction of every zonal kernel,

.. math:: \int e^{a\langle x,y\rangle}Y_l(y)\,d\sigma(y) = \hat g_a(l)\,Y_l(x),\qquad
   \hat g_a(l) = \Gamma(\nu+1)\Big(\frac2a\Big)^{\nu} I_{l+\nu}(a)
   = \frac{\int_0^\pi e^{a\cos\theta}P^{(d)}_l(\cos\theta)\sin^{d-2}\theta\,d\theta}
          {\int_0^\pi\sin^{d-2}\theta\,d\theta},

(:math:`P^{(d)}_l` the Gegenbauer polynomial normalised by :math:`P^{(d)}_l(1) = 1`;
:math:`\hat g_{-a}(l) = (-1)^l\hat g_a(l)`). Linearising
:math:`\partial_t\rho + \operatorname{div}(\rho v[\rho]) = \kappa^{-1}\Delta_S\rho` at
:math:`\rho = 1 + \varepsilon Y_l` and using :math:`\Delta_S Y_l = -l(l+d-2)Y_l`:

.. math:: \sigma_l = l(l+d-2)\Big(\sum_h \mu_h G_h(l) - \frac1\kappa\Big),\qquad
   G_h(l) = \frac{\hat g_{a_h}(l)}{a_h}\ \text{(USA)},\quad
   G_h(l) = \frac{\hat g_{a_h}(l)}{a_h\,\hat g_{a_h}(0)}\ \text{(softmax)}.

On the circle (d = 2, ν = 0) :math:`\hat g_a(l) = I_l(a)` and this is
:math:`\sigma_k = k^2(\mu I_k(a)/(a Z_0) - 1/\kappa)`. As a → 0, :math:`G(1) \to 1/d`. For USA heads
:math:`v[\sigma + \varepsilon Y_l] = \varepsilon\sum_h\mu_h G_h(l)\nabla_S Y_l` exactly (v is linear in
μ). For one head with a > 0 the ratio decreases in l, so mode 1 destabilises first and the
uniform state is stable iff :math:`\kappa < \kappa^* = 1/\max_{l\ge1}\sum_h\mu_h G_h(l)`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, ive, logsumexp

from particles import MultiHead
from particles.extend import ATTENTION_KINDS, MEAN_FIELD_KINDS, scalar_heads
from particles.validation import (
    KAPPA,
    NONE,
    AnyOf,
    Array,
    Function,
    Integer,
    Interval,
    InvalidParameterError,
    Model,
    Options,
    Relation,
    check_real_array,
    check_varies,
    declare,
    keyword_only,
)

from ._fv import SphereMesh, fv_sphere
from ._spectral.solve import spectral_ascent
from ._spectral.sphere import Sphere
from .measure import GridMeasure, fibonacci_sphere
from .quadrature import sphere_quadrature

__all__ = ["uniform_growth_rate", "critical_kappa", "funk_hecke_exp", "growth_rates", "harmonic_growth"]

_L_MAX = 64

# the parameters of the stability formulas, each rule once
_KIND = Options(*MEAN_FIELD_KINDS)
_STRENGTHS = Array((0, 1), what="one strength per head (a scalar or a 1-D array)")
_HEADS = dict(lam=_STRENGTHS, mu=AnyOf(NONE, _STRENGTHS), kind=_KIND, d=Integer(2),
              beta=Interval(0, None, hint="Pass the inverse temperature, beta >= 0."))
_SAME_HEADS = Relation(("mu", "lam"), lambda mu, lam: mu is None or np.atleast_1d(mu).shape == np.atleast_1d(lam).shape,
                       "must have one strength per head, like lam", breaks={"mu": [1.0, 2.0], "lam": [1.0]})
_SCALAR_MODEL = Model(kinds=MEAN_FIELD_KINDS, geometries=("sphere",))


_SCALAR_HEADS = Relation(("model",), lambda m: scalar_heads(m.M, m.W) is not None,
                         "must have scalar heads M_h = lambda_h I and W_h = mu_h I (only then do spherical harmonics "
                         "diagonalise the linearised flow); build it with MultiHead.scalar",
                         breaks={"model": MultiHead(np.diag([1.0, 2.0, 3.0]), beta=1.0, kind="usa")})


def _log_ive(v: float, b: float) -> float:
    r"""log(I_v(b) e^{-b}) for b > 0, finite where ``ive`` underflows (small b or large v).

    Where ive is a normal float its log is used; below that (only far in the tail, where
    :math:`I_v(b) < 10^{-290}`) the power series
    :math:`I_v(b) = (b/2)^v\sum_k (b^2/4)^k / (k!\,\Gamma(v+k+1))` is summed in the log domain,
    up to its peak term and 60 terms beyond (the term ratio is then below 1/2).
    """
    val = ive(v, b)
    if val > 1e-290:
        return float(np.log(val))
    q = b * b / 4
    # terms grow while (k+1)(v+k+1) < q: past the root k* of k^2 + (v+2)k + v+1 = 2q they halve
    k_star = max(0.0, (-(v + 2) + np.sqrt((v + 2) ** 2 - 4 * (v + 1 - 2 * q))) / 2)
    k = np.arange(int(k_star) + 61)
    terms = k * (2 * np.log(b) - np.log(4.0)) - gammaln(k + 1) - gammaln(v + k + 1)  # q = b²/4 may underflow
    return float(v * (np.log(b) - np.log(2.0)) - b + logsumexp(terms))


def _log_fh_scaled(a: float, l: int, nu: float) -> float:
    """log(ĝ_{|a|}(l) e^{-|a|}) for |a| > 0: the scaled Bessel function ive, or where it underflows
    (large l + ν, i.e. large d) the positive series of :func:`meanfield.funk_hecke_log`."""

    b = abs(a)
    return gammaln(nu + 1) + nu * (np.log(2.0) - np.log(b)) + _log_ive(l + nu, b)


@keyword_only("l", "d")
@declare(a=Interval(), l=Integer(0), d=Integer(2))
def funk_hecke_exp(a, *, l, d: int = 3) -> float:
    r"""Funk–Hecke coefficient :math:`\hat g_a(l)` of :math:`e^{a t}` on :math:`S^{d-1}` (module docstring).

    Examples
    --------
    >>> from scipy.special import iv
    >>> bool(np.isclose(funk_hecke_exp(1.5, l=2, d=2), iv(2, 1.5)))
    True
    >>> bool(np.isclose(funk_hecke_exp(1.0, l=0, d=3), np.sinh(1.0)))  # mean of e^{t} over S^2
    True
    """
    if a == 0:
        return 1.0 if l == 0 else 0.0
    sign = (-1.0) ** l if a < 0 else 1.0
    return float(sign * np.exp(_log_fh_scaled(a, l, (d - 2) / 2) + abs(a)))


def _ratio(l: int, a: float, kind: str, d: int) -> float:
    """μ-free factor G(l) of one head (module docstring), overflow-free for softmax."""
    nu = (d - 2) / 2
    if a == 0:
        return 1.0 / d if l == 1 else 0.0
    sign = (-1.0) ** (l + 1) if a < 0 else 1.0  # ĝ_{-a}(l) = (-1)^l ĝ_a(l), and 1/a = -1/|a|
    # divided by |a| in the log domain: at |a| ~ 1e-320 the quotient ĝ(1)/a ~ 1/d must not overflow
    if ATTENTION_KINDS[kind].normalised:
        return float(sign * np.exp(_log_fh_scaled(a, l, nu) - _log_fh_scaled(a, 0, nu) - np.log(abs(a))))
    return float(sign * np.exp(_log_fh_scaled(a, l, nu) + abs(a) - np.log(abs(a))))


def _heads(lam, mu):
    lam = np.atleast_1d(lam)
    return lam, lam.copy() if mu is None else np.atleast_1d(mu)


@keyword_only("lam", "mu")
@declare(**_HEADS, kappa=KAPPA, relations=[_SAME_HEADS],
         k=Integer(1, hint="Degree 0 is the constant: the flow conserves the mass, so it has no growth rate."))
def uniform_growth_rate(beta, *, lam, mu=None, kind="usa", kappa=np.inf, k=1, d=2) -> float:
    r"""Growth rate :math:`\sigma_l` (``l = k``) of degree-k harmonics around the uniform measure on
    :math:`S^{d-1}` (module docstring). ``lam``, ``mu``: one strength per head (default ``mu = lam``).

    Examples
    --------
    >>> bool(np.isclose(uniform_growth_rate(0.0, lam=1.0, d=3), 2 / 3))  # l(l+1) · 1/d at a -> 0
    True
    """
    lam, mu = _heads(lam, mu)
    G = sum(m * _ratio(k, beta * la, kind, d) for la, m in zip(lam, mu))
    return float(k * (k + d - 2) * (G - 1.0 / kappa))


@declare(model=_SCALAR_MODEL, l_max=Integer(0), kappa=KAPPA, relations=[_SCALAR_HEADS, Relation(
    ("model",), lambda model: model.d >= 2, "must have d >= 2 (S^0 is two points: it has no harmonics to grow)",
    breaks={"model": MultiHead.scalar([1.0], d=1, beta=1.0, kind="usa")})])
def growth_rates(model: MultiHead, *, l_max: int = 8, kappa=np.inf) -> np.ndarray:
    r""":math:`\sigma_l` for l = 0..l_max of a :class:`~particles.MultiHead` with scalar heads
    :math:`M_h = \lambda_h I`, :math:`W_h = \mu_h I` (kind ``"usa"`` or ``"softmax"``), shape (l_max + 1,)."""
    lam, mu = scalar_heads(model.M, model.W)
    # USA outputs of a model in rescaled time carry e^{-c}; the noise term κ⁻¹Δ does not
    scale = np.exp(-model.attention.time_shift(model.log_time_scale))
    G = np.array([sum(m * _ratio(l, model.beta * la, model.kind, model.d) for la, m in zip(lam, mu))
                  for l in range(l_max + 1)])
    l = np.arange(l_max + 1)
    return l * (l + model.d - 2) * (scale * G - 1.0 / kappa)


@keyword_only("lam", "mu")
@declare(**_HEADS, relations=[_SAME_HEADS])
def critical_kappa(beta, *, lam, mu=None, kind="usa", d=2) -> float:
    r""":math:`\kappa^* = 1/\max_{1\le l\le 64}\sum_h\mu_h G_h(l)`: the uniform measure is linearly
    stable iff κ < κ* (``inf`` if no degree is ever unstable). For one head with a > 0 the maximum
    is at l = 1: :math:`\kappa^* = a Z_0/(\mu I_1(a))` on the circle."""
    lam, mu = _heads(lam, mu)
    best = max(sum(m * _ratio(l, beta * la, kind, d) for la, m in zip(lam, mu)) for l in range(1, _L_MAX + 1))
    return float(1.0 / best) if best > 0 else np.inf


_M_CAP = 2 * (Sphere.max_L + 1) ** 2  # the Gauss-Legendre grid of the S^2 solver's band-limit cap


#: the schemes of harmonic_growth: those of wasserstein_ascent (meanfield.flow.SCHEMES), called with the mesh and
#: the options built here
_SCHEMES = {"spectral": spectral_ascent, "fv_sphere": fv_sphere}


@declare(model=_SCALAR_MODEL, harmonic_fn=Function("harmonic_fn(points of shape (m, 3)) -> (m,)"),
         m=Integer(8, hint="Pass the number of grid points, e.g. m=2000."), t1=Interval(0, None, closed="neither"),
         n_saves=Integer(2, hint="A rate needs two times at least."), kappa=KAPPA,
         eps=Interval(0, None, closed="neither"), scheme=Options(*_SCHEMES),
         relations=[Relation(("model",), lambda model: model.d == 3, "must have d = 3 (harmonic_growth runs on S^2)",
                             breaks={"model": MultiHead.scalar([1.0], d=4, beta=1.0, kind="usa")}),
                    Relation(("m", "scheme"), lambda m, scheme: scheme != "spectral" or m <= _M_CAP,
                             f"asks for a band limit above the S^2 spectral solver's cap max_L={Sphere.max_L} "
                             f"(refused at once: such grids take minutes and gigabytes): use m <= "
                             f"{_M_CAP}, or scheme='fv_sphere'", breaks={"m": 10**8, "scheme": "spectral"})])
def harmonic_growth(model: MultiHead, harmonic_fn, *, m: int, t1: float, n_saves: int = 4, kappa=np.inf,
                    eps: float = 1e-3, scheme: str = "spectral"):
    r"""Growth of one harmonic in an S^2 mean-field solver: (t, amplitude, fitted rate).

    Starts the solver from the densities :math:`1 \pm \varepsilon Y` (``harmonic_fn(points) -> Y``)
    and returns the half difference of :math:`A_\pm(t) = \sum_k p_k(t) Y(y_k)`, which cancels the
    drift of a discrete uniform state (not exactly stationary on a mesh) and the O(ε²) terms, and
    the least-squares slope of :math:`\log A` against t, to compare with :math:`\sigma_l` of
    :func:`growth_rates`. ``scheme="spectral"`` (default): spherical harmonics on the Gauss–Legendre
    grid ``sphere_quadrature(3, n=n)`` with :math:`2n^2 \approx m` points, band limit n − 1, step
    tolerance 1e-12 (A is then exact quadrature of a band-limited density); ``"fv_sphere"``: finite
    volumes on the Voronoi cells of ``m`` Fibonacci points.

    Examples
    --------
    >>> model = MultiHead.scalar([1.0], d=3, beta=1.5, kind="softmax")
    >>> t, amp, rate = harmonic_growth(model, lambda y: y[:, 2], m=200, t1=0.2, n_saves=3)
    >>> bool(np.isclose(rate, growth_rates(model, l_max=1)[1], rtol=1e-6))
    True
    """
    caller = "harmonic_growth"
    if scheme == "spectral":
        n = max(4, int(np.ceil(np.sqrt(m / 2))))
        pts, w = sphere_quadrature(3, n=n)
        areas = 4 * np.pi * w
        options = {"L": n - 1, "rtol": 1e-12}
    else:
        pts, _ = fibonacci_sphere(m)
        areas = SphereMesh.from_points(pts).areas
        options = {}
    Y = check_real_array(harmonic_fn(pts), "harmonic_fn(points)", caller, finite=False, min_size=0)
    if Y.shape != (len(pts),) or not np.all(np.isfinite(Y)):
        raise InvalidParameterError(
            f"harmonic_fn of {caller} must return finite values of shape ({len(pts)},) for points (m, 3)."
        )
    check_varies(Y, "harmonic_fn(points)", caller, why="a constant is the degree-0 part, which the normalisation "
                 "of the mass removes: nothing grows; pass a harmonic of degree >= 1, e.g. lambda y: y[:, 2]")
    scale = float(np.max(np.abs(Y)))
    amps = []
    ts = np.linspace(0.0, t1, n_saves)  # (the save times of wasserstein_ascent)
    for sign in (1.0, -1.0):
        p0 = areas * (1 + sign * eps * Y / scale)
        mu0 = GridMeasure(pts, areas, p0 / p0.sum())
        res = _SCHEMES[scheme](mu0, model, ts, kappa=kappa, **options)
        amps.append(res.mass @ harmonic_fn(res.points))
    amp = (amps[0] - amps[1]) / 2
    return res.t, amp, float(np.polyfit(res.t, np.log(np.abs(amp)), 1)[0])
