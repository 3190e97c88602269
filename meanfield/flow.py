r"""Wasserstein gradient ascent of :math:`E_{multi}` for measures on the sphere (docs/theory.md §6).

:math:`\partial_t\mu + \operatorname{div}(\mu\, v[\mu]) = \kappa^{-1}\Delta_S\mu`, solved by one of
:data:`SCHEMES`. A scheme is a function ``scheme(mu0, model, ts, **options) -> MeanFieldResult``:

1. it takes a :class:`~meanfield.EmpiricalMeasure` or :class:`~meanfield.GridMeasure`,
   the :class:`particles.MultiHead` whose USA or softmax heads define v[μ], and the
   increasing save times ``ts``;
2. it returns the measure at each save time (atoms move, or cell masses change);
3. it conserves mass exactly and keeps masses non-negative (states its CFL or step rule).

Schemes:

- ``"lagrangian"``: weighted atoms carried by v[μ] (with n atoms of weight 1/n this *is*
  the particle flow; no noise);
- ``"fv_circle"``: finite volumes in angle on S^1, upwind fluxes, SSP-RK2 in time, explicit
  diffusion κ⁻¹∂²_θ; the velocity at the faces is an FFT convolution when every head is
  scalar (M_h = λ_h I, W_h = μ_h I), a dense kernel sum otherwise. Mass exact
  (telescoping fluxes), positivity under dt (max|v|/Δθ + 2κ⁻¹/Δθ²) ≤ 1 (enforced);
- ``"fv_sphere"``: finite volumes on the spherical Voronoi cells of a point set on S^2,
  two-point upwind fluxes through the shared Voronoi edges (velocity at the edge
  midpoints), two-point diffusion fluxes, SSP-RK2; mass exact, positivity under the
  per-cell CFL bound (enforced);
- ``"jko"``: entropic JKO (Peyré 2015) on any discretised sphere (USA heads under C3 + C4,
  the gradient-flow case), linearised step in closed form (log domain), τ = 2 dt so that
  W² + τF matches (1/(2dt))W² + F; noise κ⁻¹Δ by Lie splitting with one heat-kernel step
  (the JKO step of the entropy), so the scheme is first order in dt. The entropic blur
  adds a diffusion ≈ γ/(2τ): the default γ = max(τ/50, 2h²), h the grid spacing;
- ``"spectral"``: pseudo-spectral (:mod:`meanfield.spectral`): Fourier on S^1, spherical
  harmonics on the Gauss–Legendre grid of S^2, Gegenbauer polynomials for a
  :class:`~meanfield.ZonalMeasure` on S^{d-1}; noise exact (integrating factor), adaptive
  embedded RK 5(4), mass exact, the spectral tail checked after every step (refusal with a
  sufficient L, or refinement with ``L=None``); densities are not forced non-negative, their
  minimum is reported. Besides USA and softmax it runs a kind that states its zonal kernel
  (``Kind.zonal_kernel``: sigmoid attention of a given number of tokens) with scalar heads.
"""

from __future__ import annotations

import inspect

import numpy as np

from particles import STEPPERS, SaveAt, simulate
from particles.extend import LAGRANGIAN_KINDS
from particles.validation import (
    KAPPA,
    NONE,
    AnyOf,
    Boolean,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Model,
    Options,
    Relation,
    declare,
)

from ._fv import SphereMesh, circle_velocity, fv_circle, fv_sphere
from ._jko import jko_ascent
from ._result import MeanFieldResult
from ._spectral.solve import spectral_ascent
from ._spectral.zonal import ZonalMeasure
from .field import measure_energy, weighted_velocity
from .measure import EmpiricalMeasure, GridMeasure

__all__ = ["wasserstein_ascent", "MeanFieldResult", "SCHEMES", "circle_velocity", "SphereMesh"]


# ------------------------------------------------------------------ Lagrangian


def _lagrangian(mu0, model, ts, *, dt=None, method="rk4", kappa=np.inf, **run):
    if not isinstance(mu0, EmpiricalMeasure):
        raise InvalidParameterError("scheme 'lagrangian' needs an EmpiricalMeasure.")
    if np.isfinite(kappa):
        raise InvalidParameterError("scheme 'lagrangian' is noiseless: use 'fv_circle' or 'jko' for kappa < inf.")
    w = mu0.weights

    def fieldfn(t, x):  # inside the solve loop: the atoms were validated once, at the start
        return weighted_velocity(model, x, w, x)

    traj = simulate(mu0.points, fieldfn, t0=ts[0], t1=ts[-1], dt=dt, method=method, save=SaveAt(ts=ts),
                    geometry=model.geometry, **run)
    # the energy E_multi of the exponential kinds (NaN for a kind of other weights)
    energy = np.array([measure_energy(model, x, w) if model.attention.exp_rule else np.nan for x in traj.x])
    return MeanFieldResult(traj.t, traj.x, np.tile(w, (len(traj.t), 1)), energy, "lagrangian", traj.n_steps,
                           status=traj.status, message=traj.message)


SCHEMES = {"lagrangian": _lagrangian, "fv_circle": fv_circle, "fv_sphere": fv_sphere, "jko": jko_ascent,
           "spectral": spectral_ascent}


def _dim(mu0):
    return mu0.points.shape[1] if hasattr(mu0, "points") else mu0.d  # a ZonalMeasure has no atoms


_POS = Interval(0, None, closed="neither")
_CFL = Interval(0, 1, closed="right")
#: the options of the particle solve loop every scheme runs in (particles.simulate)
_RUN = dict(max_steps=Integer(1), progress=Boolean(), on_failure=Options("raise", "return"))
#: each scheme's options and their rules, declared once: the options a scheme accepts (an unknown one is a
#: typo: refused, not ignored) and the checks of wasserstein_ascent derive from this table
SCHEME_OPTIONS = {
    "lagrangian": dict(dt=AnyOf(NONE, _POS), method=Options(*STEPPERS), **_RUN),
    "fv_circle": dict(cfl=_CFL, kappa=KAPPA, **_RUN),
    "fv_sphere": dict(cfl=_CFL, kappa=KAPPA, **_RUN),
    "jko": dict(dt=_POS, gamma=AnyOf(NONE, _POS), kappa=KAPPA, **_RUN),
    "spectral": dict(L=AnyOf(NONE, Integer(2)), tol=Interval(0, 1, closed="neither"), rtol=Interval(1e-15, 1e-2),
                     kappa=KAPPA, max_L=AnyOf(NONE, Integer(2)), **_RUN),
}
#: every option name with the rule of the first scheme that has it (the call's own check); the scheme's rule
#: is checked next (jko's dt is required, the Lagrangian one optional)
_ANY_SCHEME_OPTION = {name: rule for options in reversed(SCHEME_OPTIONS.values()) for name, rule in options.items()}
_ASCENT_RELATIONS = [
    Relation(("t1", "t0"), lambda t1, t0: t1 > t0, "must be greater than t0", breaks={"t0": 5.0}),
    Relation(("mu0", "model"), lambda mu0, model: _dim(mu0) == model.d,
             "must live on the model's sphere: build mu0 on S^{d-1} for the model's d (or a model of mu0's d)",
             breaks={"mu0": EmpiricalMeasure(np.eye(5))}),  # (no valid call is on S^4)
    Relation(("mu0", "scheme"), lambda mu0, scheme: scheme == "spectral" or not isinstance(mu0, ZonalMeasure),
             "a ZonalMeasure is solved by scheme='spectral' only",
             breaks={"mu0": ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3), "scheme": "jko"}),
]


@declare(mu0=Instance((EmpiricalMeasure, GridMeasure, ZonalMeasure),
                     what="an EmpiricalMeasure, GridMeasure or ZonalMeasure"),
         model=Model(kinds=LAGRANGIAN_KINDS), t1=Interval(), n_saves=Integer(2), scheme=Options(*SCHEMES),
         t0=Interval(), **_ANY_SCHEME_OPTION, relations=_ASCENT_RELATIONS)
def wasserstein_ascent(mu0, model, *, t1: float, n_saves: int = 11, scheme: str = "lagrangian", t0: float = 0.0,
                       **options) -> MeanFieldResult:
    r"""Solve the mean-field flow from μ0 up to t1 and save ``n_saves`` equally spaced states.

    Parameters
    ----------
    mu0 : EmpiricalMeasure or GridMeasure
    model : particles.MultiHead
        Of kind "usa" or "softmax" for every scheme; of a kind whose pass takes weighted atoms (sigmoid,
        Sinkhorn) for "lagrangian"; of a kind stating a zonal kernel (``particles.Sigmoid(tokens=n)``)
        with scalar heads for "spectral".
    t1 : float
    n_saves : int
    scheme : {"lagrangian", "fv_circle", "fv_sphere", "jko", "spectral"}
    **options
        Scheme options: ``dt``/``method`` (lagrangian, jko), ``kappa`` (fv_circle, fv_sphere, jko),
        ``cfl`` and ``max_steps`` (fv_circle, fv_sphere), ``gamma`` (jko entropic blur; default
        τ/50); ``L`` (spectral band limit; None: chosen and refined to meet ``tol``, up to ``max_L``),
        ``tol`` (spectral tail tolerance, default 1e-10), ``rtol`` (spectral local step tolerance,
        default 1e-10): the spectral scheme returns ``info["solution"]``
        (:class:`~meanfield.SpectralSolution`), ``info["tail"]`` and ``info["min_density"]`` per save
        time; ``progress``, ``on_failure`` and ``max_steps`` (every scheme: each is a stepper of the
        particle solve loop, :func:`particles.simulate`: Runge–Kutta on the atoms, Heun under a CFL
        step on finite-volume masses, the JKO proximal step with constant steps, integrating-factor
        Dormand–Prince on spectral coefficients, so all share its progress bar and failure policy:
        ``"raise"`` a :class:`particles.SolverError`, or ``"return"`` a result with ``status="failed"``
        cut at the last save reached).

    Examples
    --------
    >>> from meanfield import EmpiricalMeasure
    >>> from particles import MultiHead
    >>> model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    >>> res = wasserstein_ascent(EmpiricalMeasure(np.eye(3)), model, t1=1.0, dt=0.1, n_saves=3)
    >>> res.points.shape
    (3, 3, 3)
    """
    ts = np.linspace(t0, t1, n_saves)
    _check_options(scheme, options)
    kind = model.attention
    if scheme != "lagrangian" and kind.exp_rule is None and not (scheme == "spectral" and kind.has_zonal_kernel):
        kind.mean_field()  # the kind's refusal, naming its route
    if scheme == "lagrangian" and options.get("dt") is None and options.get("method", "rk4") != "dopri5":
        raise InvalidParameterError("scheme 'lagrangian' with a fixed-step method needs dt.")
    return SCHEMES[scheme](mu0, model, ts, **options)


def _check_options(scheme: str, options: dict) -> None:
    """The options given to ``scheme``: known to it (a typo is refused, not ignored), each by the
    scheme's own rule, and the ones its function requires given."""
    rules = SCHEME_OPTIONS[scheme]
    unknown = set(options) - set(rules)
    if unknown:
        raise InvalidParameterError(f"scheme {scheme!r} of wasserstein_ascent takes the options {sorted(rules)}; "
                                    f"got unknown {sorted(unknown)}.")
    caller = f"wasserstein_ascent(scheme={scheme!r})"
    for name, param in inspect.signature(SCHEMES[scheme]).parameters.items():
        if param.kind is param.KEYWORD_ONLY and param.default is param.empty and name not in options:
            raise InvalidParameterError(f"{caller} needs {name} ({rules[name].describe()}); pass {name}=...")
    for name, value in options.items():
        rules[name].check(value, name, caller)
