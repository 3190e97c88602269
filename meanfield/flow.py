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
  minimum is reported.
"""

from __future__ import annotations

import numpy as np

from particles import MultiHead, SaveAt, simulate
from particles.validation import InvalidParameterError, check_choice, check_param

from ._fv import SphereMesh, _fv_circle, _fv_sphere, circle_velocity
from ._jko import _jko
from ._result import MeanFieldResult
from .field import measure_energy
from .measure import EmpiricalMeasure, GridMeasure

__all__ = ["wasserstein_ascent", "MeanFieldResult", "SCHEMES", "circle_velocity", "SphereMesh"]


def _check_model(model):
    if not isinstance(model, MultiHead) or model.kind not in ("usa", "softmax"):
        raise InvalidParameterError("model must be a particles.MultiHead with kind 'usa' or 'softmax'.")
    return model


# ------------------------------------------------------------------ Lagrangian


def _lagrangian(mu0, model, ts, *, dt=None, method="rk4", kappa=np.inf, **run):
    if not isinstance(mu0, EmpiricalMeasure):
        raise InvalidParameterError("scheme 'lagrangian' needs an EmpiricalMeasure.")
    if np.isfinite(kappa):
        raise InvalidParameterError("scheme 'lagrangian' is noiseless: use 'fv_circle' or 'jko' for kappa < inf.")
    w = mu0.weights

    def fieldfn(t, x):
        return _lagrangian_velocity(model, x, w)

    traj = simulate(mu0.points, fieldfn, t0=ts[0], t1=ts[-1], dt=dt, method=method, save=SaveAt(ts=ts),
                    geometry=model.geometry, **run)
    energy = np.array([measure_energy(model, x, w) for x in traj.x])
    return MeanFieldResult(traj.t, traj.x, np.tile(w, (len(traj.t), 1)), energy, "lagrangian", traj.n_steps,
                           status=traj.status, message=traj.message)


def _lagrangian_velocity(model, x, w):
    # inside the solve loop: the atoms were validated once, at the start
    from .field import _velocity

    return _velocity(model, x, w, x)


def _spectral(mu0, model, ts, **options):
    from .spectral import spectral_ascent

    return spectral_ascent(mu0, model, ts, **options)


SCHEMES = {"lagrangian": _lagrangian, "fv_circle": _fv_circle, "fv_sphere": _fv_sphere, "jko": _jko,
           "spectral": _spectral}


def wasserstein_ascent(mu0, model, *, t1: float, n_saves: int = 11, scheme: str = "lagrangian", t0: float = 0.0,
                       **options) -> MeanFieldResult:
    r"""Solve the mean-field flow from μ0 up to t1 and save ``n_saves`` equally spaced states.

    Parameters
    ----------
    mu0 : EmpiricalMeasure or GridMeasure
    model : particles.MultiHead (kind "usa" or "softmax")
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
    >>> model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    >>> res = wasserstein_ascent(EmpiricalMeasure(np.eye(3)), model, t1=1.0, dt=0.1, n_saves=3)
    >>> res.points.shape
    (3, 3, 3)
    """
    check_choice(scheme, "scheme", SCHEMES, "wasserstein_ascent")
    _check_model(model)
    t0 = check_param(t0, "t0", "wasserstein_ascent")
    t1 = check_param(t1, "t1", "wasserstein_ascent")
    if t1 <= t0:
        raise InvalidParameterError(f"t1 must be greater than t0 = {t0:g}; got {t1:g}.")
    n_saves = check_param(n_saves, "n_saves", "wasserstein_ascent", low=2, integer=True)
    ts = np.linspace(t0, t1, n_saves)
    _check_options(scheme, mu0, options)
    dim = mu0.points.shape[1] if hasattr(mu0, "points") else mu0.d  # a ZonalMeasure has no atoms
    if dim != model.d:
        raise InvalidParameterError(
            f"The 'mu0' parameter of wasserstein_ascent lives on S^{dim - 1} (points of d = {dim}) but the model "
            f"is {model.d}-dimensional; build mu0 on S^{model.d - 1} or a model of d = {dim}."
        )
    if scheme == "lagrangian" and options.get("dt") is None and options.get("method", "rk4") != "dopri5":
        raise InvalidParameterError("scheme 'lagrangian' with a fixed-step method needs dt.")
    return SCHEMES[scheme](mu0, model, ts, **options)


#: options each scheme accepts (an unknown option is a typo: refused, not ignored)
_RUN = {"progress", "on_failure"}  # handled by the particle solve loop (simulate)
_OPTIONS = {"lagrangian": {"dt", "method", "max_steps"} | _RUN, "fv_circle": {"cfl", "kappa", "max_steps"} | _RUN,
            "fv_sphere": {"cfl", "kappa", "max_steps"} | _RUN, "jko": {"dt", "gamma", "kappa", "max_steps"} | _RUN,
            "spectral": {"L", "tol", "rtol", "kappa", "max_steps", "max_L"} | _RUN}


def _check_options(scheme, mu0, options):
    """Validate the scheme options of wasserstein_ascent once, at the boundary."""
    caller = "wasserstein_ascent"
    from .spectral import ZonalMeasure

    if not isinstance(mu0, (EmpiricalMeasure, GridMeasure, ZonalMeasure)):
        raise InvalidParameterError(
            f"The 'mu0' parameter of {caller} must be an EmpiricalMeasure, GridMeasure or ZonalMeasure; "
            f"got {type(mu0).__name__}."
        )
    if isinstance(mu0, ZonalMeasure) and scheme != "spectral":
        raise InvalidParameterError(f"a ZonalMeasure is solved by scheme='spectral' only; got scheme={scheme!r}.")
    unknown = set(options) - _OPTIONS[scheme]
    if unknown:
        raise InvalidParameterError(
            f"scheme {scheme!r} of {caller} takes the options {sorted(_OPTIONS[scheme])}; got unknown {sorted(unknown)}."
        )
    if "kappa" in options:
        options["kappa"] = check_param(options["kappa"], "kappa", caller, low=0.0, low_open=True, allow_inf=True)
    if "cfl" in options:
        options["cfl"] = check_param(options["cfl"], "cfl", caller, low=0.0, high=1.0, low_open=True)
    if "max_steps" in options:
        options["max_steps"] = check_param(options["max_steps"], "max_steps", caller, low=1, integer=True)
    if options.get("dt") is not None:
        options["dt"] = check_param(options["dt"], "dt", caller, low=0.0, low_open=True)
    if "method" in options:
        from particles import STEPPERS

        check_choice(options["method"], "method", STEPPERS, caller)
