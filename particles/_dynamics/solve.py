"""The one solve loop for particle flows on the sphere (and in flat space).

``simulate(x0, field, t1=..., dt=..., method=...)``: a field (:mod:`~particles._dynamics.field`),
a stepper from :data:`~particles.STEPPERS` (which retracts onto the manifold), a step-size
controller (:mod:`~particles._dynamics.controllers`: constant steps that land on the save
times, or PID control of an embedded error), a cheap finiteness check every ``check_every``
steps, and a :class:`~particles._dynamics.saving.Saver` for what :class:`SaveAt` asks.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._core.declarations import Relation, declare
from .._core.errors import InvalidParameterError, SolverError, StabilityWarning
from .._core.params import KAPPA, NONE, AnyOf, Boolean, Function, Instance, Integer, Interval, Options
from .._core.params_data import Checked, Seed
from .._core.sphere import GEOMETRIES
from .._core.validation import check_rng
from .._summation.record import recording
from .controllers import ConstantStep, PIDController
from .events import check_events
from .field import CallableField, as_field, field_fingerprint
from .loop import _advance, _State
from .progress import progress_bar
from .saving import SaveAt, Saver, Trajectory
from .steppers import STEPPERS, Stepper

__all__ = ["simulate", "tqdm_class"]


_POS = Interval(0, None, closed="neither")
#: an adaptive step's relative tolerance: below float64's round-off it cannot be met, only chased with steps
_RTOL = Interval(1e-15, None, hint="float64 round-off is 2.2e-16: a smaller rtol is never met, it only multiplies "
                 "the steps (rtol=1e-20 took 60 000 steps where 1e-12 takes 57); 1e-12 is near the floor.")
# the field checks the state's shape: tokens (n, d), a stack (S, n, d) for an Ensemble, or a
# scheme's own state (complex spectral coefficients for the mean-field integrating-factor steps)
def _state(value, name, caller):
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise InvalidParameterError(f"{name} must be an array (the field's state); got {type(value).__name__}.")
    try:
        arr = np.asarray(value)
    except ValueError:
        raise InvalidParameterError(f"{name} must be a rectangular array; got a ragged sequence.") from None
    if arr.dtype.kind not in "fciu" or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"{name} must be a non-empty finite numeric array; got dtype {arr.dtype}, "
                                    f"shape {arr.shape}.")
    return value


_EVENTS = Checked(check_events, "an event function g(t, x) (attributes terminal, direction) or a sequence of them",
                  [3, "abc", [3], [np.sin, "x"]])
_STATE = Checked(_state, "a finite array: tokens of shape (n, d), a stack (S, n, d) or a scheme's state",
                 [None, "abc", [[1.0, 0.0], [1.0]], [[np.nan, 1.0]], np.zeros((0, 3)), [[True, False]]])


def _stepper(method):
    return method if isinstance(method, Stepper) else STEPPERS[method]


_SIMULATE_RELATIONS = [
    Relation(("t1", "t0"), lambda t1, t0: t1 > t0, "must be greater than t0", breaks={"t0": 1.0}),
    Relation(("dt", "method", "controller"), lambda dt, m, c: dt is not None or _stepper(m).adaptive or c is not None,
             "must be given for a fixed-step method (or pass an adaptive method, or a controller)",
             breaks={"dt": None}),
    Relation(("kappa", "method"), lambda kappa, m: kappa == np.inf or _stepper(m).stochastic,
             "must be inf unless method='euler_maruyama' (a finite kappa adds noise)", breaks={"kappa": 1.0}),
    Relation(("save", "method"),
             lambda save, m: save is None or save.every is None or _stepper(m).name != "dopri5_systems",
             "SaveAt(every=k) counts steps, but method='dopri5_systems' gives every system steps of its own (no common "
             "step to count): pass SaveAt(ts=...) with the save times", breaks={"save": SaveAt(every=2),
                                                                               "method": "dopri5_systems"}),
    Relation(("events", "method"), lambda events, m: not events or _stepper(m).name != "dopri5_systems",
             "need steps the solve loop sees, but method='dopri5_systems' steps every system on its own inside the "
             "loop's step: pass method='dopri5' (or a fixed-step method)", breaks={"events": [np.sin],
                                                                                 "method": "dopri5_systems"}),
]


@declare(x0=_STATE, field=Function("a vector field: a MultiHead, an Ensemble or a callable "
         "field(t, x)"), t1=Interval(), dt=AnyOf(NONE, _POS), t0=Interval(),
         method=AnyOf(Options(*STEPPERS), Instance(Stepper)), save=AnyOf(NONE, Instance(SaveAt, hint="Use "
         "particles.SaveAt(ts=..., every=..., fn=...).")), kappa=KAPPA,
         rng=Seed(), rtol=_RTOL, atol=_POS, max_steps=Integer(1), check_every=Integer(1),
         on_failure=Options("raise", "return"), geometry=AnyOf(NONE, Options(*GEOMETRIES)),
         progress=AnyOf(NONE, Boolean()),
         controller=AnyOf(NONE, Instance(object, what="a step-size controller (first, propose, decide)", bad=(3, "pid"),
                                         test=lambda c: all(hasattr(c, f) for f in ("first", "propose", "decide")))),
         events=_EVENTS, relations=_SIMULATE_RELATIONS)
def simulate(
    x0,
    field,
    *,
    t1: float,
    dt: float | None = None,
    t0: float = 0.0,
    method: str | Stepper = "rk4",
    save: SaveAt | None = None,
    kappa: float = np.inf,
    rng=None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 10_000_000,
    check_every: int = 10,
    on_failure: str = "raise",
    geometry: str | None = None,
    progress: bool | None = None,
    controller=None,
    events=None,
) -> Trajectory:
    r"""Integrate :math:`dX_i = \dot x_i(X)\,dt + \sqrt{2/\kappa}\,P_{X_i} dB_i` from t0 to t1.

    Main arguments
    --------------
    x0 : array_like of shape (n, d)
        Initial tokens (unit rows on the sphere).
    field : MultiHead, Ensemble, TimeDependent or callable ``field(t, x) -> (n, d)``
        The velocity. A field (:mod:`particles._dynamics.field`) states its geometry; an
        :class:`Ensemble` integrates a stack x0 of shape (S, n, d) at once; a plain callable
        runs on ``geometry`` (default "sphere") and must return tangent vectors there.
    t1 : float
        Final time.
    dt : float
        Step (fixed-step methods) or initial step (``"dopri5"``; default (t1 − t0)/100).
    method : {"euler", "heun", "rk4", "dopri5", "dopri5_systems", "rkc", "euler_maruyama"} or Stepper
        ``"dopri5_systems"``: one adaptive step per system of a stack (fields with ``systems``,
        e.g. :class:`Ensemble`); ``"rkc"``: Runge–Kutta–Chebyshev for stiff flows (stages grow
        like the square root of the stiffness). ``"euler_maruyama"`` is required when ``kappa``
        is finite. A
        :class:`~particles._dynamics.steppers.Stepper` object runs its own step in this loop (the
        mean-field schemes' JKO and integrating-factor steps do).

    Other arguments
    ---------------
    save : SaveAt
        What to store (default: t0 and t1 positions).
    kappa : float in (0, inf]
        Inverse noise strength; the noise is Brownian motion with generator κ⁻¹Δ_S.
    rng : Generator, int or None
        Randomness for the noise. ``None`` with noise draws fresh entropy and keeps it in
        ``Trajectory.noise_entropy`` (``rng=int(traj.noise_entropy)`` repeats the run).
    rtol, atol : float
        Tolerances of the adaptive method.
    max_steps : int
        Accepted + rejected steps allowed.
    check_every : int
        Steps between finiteness checks (an O(nd) sum).
    on_failure : {"raise", "return"}
        On a non-finite state, raise :class:`SolverError`, or return a Trajectory with
        ``status="failed"`` cut at the last finite save.
    progress : bool or None
        Show a tqdm progress bar (True), none (False), or (None, the default) one that opens once
        the run, timed as it goes, is forecast to take more than a few seconds.
    controller : step-size controller, optional
        Default: constant steps ``dt`` for fixed-step methods, PID control of the error
        estimate for adaptive ones; e.g. a CFL controller for finite-volume states
        (:mod:`particles._dynamics.controllers`).
    events : callable or sequence of callables, optional
        ``g(t, x)`` (one value per system for an :class:`Ensemble`) with ``terminal`` and ``direction``
        as in ``solve_ivp(events=...)``: :mod:`particles.events`. Zero crossings are located on each
        step's interpolant, kept in ``Trajectory.events``; a terminal one ends the run there
        (``status="terminated"``; a stack when every system has met it). Not with ``"dopri5_systems"``.

    Returns
    -------
    Trajectory

    Warns
    -----
    StabilityWarning
        With constant steps, where dt times the field's consensus rate r (:meth:`particles.Ensemble.consensus_rate`:
        tokens near one point contract to it at rate r) exceeds the method's stability interval (2 for euler and
        heun, 2.785 for rk4): the numerical consensus then repels, and tokens that collapse in the flow stay
        apart in the run (USA heads 0.5, 1, 2 at β = 0.5: r = 7.73, so heun needs dt <= 0.259).

    Examples
    --------
    >>> from particles import MultiHead
    >>> model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    >>> x0 = np.eye(3)
    >>> traj = simulate(x0, model, t1=1.0, dt=0.1)
    >>> traj.x.shape, bool(np.allclose(np.linalg.norm(traj.x, axis=-1), 1))
    ((2, 3, 3), True)
    """
    caller = "simulate"  # (the declaration checked every argument; what follows relates and converts them)
    stepper, method = _stepper(method), (method.name if isinstance(method, Stepper) else method)
    fingerprint = field_fingerprint(field)
    field = as_field(field, geometry, caller)
    x = field.check_x(x0, "x0")
    t0, t1, dt, sigma, opts = _check_options(stepper, method, t0, t1, dt, kappa, rtol, atol, max_steps, check_every,
                                             controller)
    save = _check_save(save, method, caller)
    rng, noise_entropy = _noise_rng(rng, sigma, caller)
    if isinstance(field, CallableField):
        field.probe(t0, x)
    saver = Saver(save, t0, t1, x, caller)
    controller = _controller(controller, stepper, dt)
    _check_stable(field, stepper, controller, method, caller)
    bar = progress_bar(progress, t1 - t0, method, tqdm_class)
    state = _State(t=t0, x=x, last_good=x, h=controller.first(dt, t0, t1))
    state.begin(field, stepper, controller, saver, events, caller)
    status, message = "finished", "reached t1"
    with recording("simulate") as sums:
        try:
            for k, target in enumerate(saver.targets):
                if _advance(state, target, field, stepper, controller, saver, bar, rng=rng, sigma=sigma, **opts):
                    saver.stop(state.t, state.x)  # a terminal event: the run ends there
                    status, message = "terminated", f"a terminal event stopped the run at t={state.t:.12g}"
                    break
                saver.at_target(k, state.t, state.x)
        except SolverError as exc:
            if on_failure == "raise":
                raise
            status, message = "failed", str(exc)
        finally:
            if bar is not None:
                bar.close()
    return saver.trajectory(status=status, message=message, n_steps=state.n_steps, n_rejected=state.n_rejected,
                            x_final=state.last_good if status == "failed" else state.whole(state.x), method=method,
                            fingerprint=fingerprint, noise_entropy=noise_entropy, summation=sums.summary(),
                            events=() if state.events is None else state.events.records())


def _noise_rng(rng, sigma, caller):
    """The noise's generator, and the entropy drawn for an unseeded noisy run ("" otherwise)."""
    noise_entropy = ""
    if rng is None and sigma > 0:
        seq = np.random.SeedSequence()
        rng, noise_entropy = seq, str(seq.entropy)
    return check_rng(rng, "rng", caller), noise_entropy


def _controller(controller, stepper, dt):
    """The given controller (checked), else constant steps dt, or PID control for an adaptive stepper."""
    if controller is None:
        return PIDController(stepper.error_order) if stepper.adaptive else ConstantStep(dt)
    _check_controller(controller)
    return controller


def _check_stable(field, stepper, controller, method: str, caller: str) -> None:
    """Warn (:class:`StabilityWarning`) where constant steps dt put the field's consensus rate r
    (``consensus_rate()``: tokens near one point contract to it at rate r) outside the stepper's
    stability interval: dt·r above it makes the numerical consensus repel, so tokens that should collapse
    oscillate about their cluster and cluster statistics come out wrong without any other sign."""
    rate = getattr(field, "consensus_rate", None)
    if rate is None or stepper.stability is None or type(controller) is not ConstantStep:
        return
    rate = rate()
    if rate is None:
        return
    r, dt = float(np.max(rate)), controller.dt
    if dt * r > stepper.stability:
        better = [name for name, s in STEPPERS.items() if s.stability is not None and dt * r <= s.stability]
        warnings.warn(StabilityWarning(
            f"dt={dt:g} of {caller} is beyond {method}'s stability interval ({stepper.stability:.4g}) at the field's "
            f"consensus rate {r:.4g} (dt x rate = {dt * r:.4g}): tokens that collapse into a cluster oscillate about "
            f"it instead of converging, and cluster statistics come out wrong. Use dt <= {stepper.stability / r:.3g}"
            + (f", or method={better[0]!r} (interval {STEPPERS[better[0]].stability:.4g})" if better else "")
            + ", or an adaptive method ('dopri5')" + (", or log_time_scale='auto' (the rescaled time divides the rate "
                                                        "by the largest e^{beta |m_h|})" if _rescalable(field) else "")
            + "."), stacklevel=4)


def _rescalable(field) -> bool:
    """The field's time can be rescaled by log_time_scale='auto' (a MultiHead of USA heads not rescaled yet)."""
    kind = getattr(field, "attention", None)
    return getattr(field, "log_time_scale", None) == 0.0 and bool(getattr(kind, "partition", False))


def _check_save(save, method: str, caller: str) -> SaveAt:
    """The run's :class:`SaveAt` (default: the start and the end)."""
    save = SaveAt() if save is None else save
    if save.every is not None and method == "dopri5_systems":
        # its outer steps only land on the save targets: each system takes steps of its own
        raise InvalidParameterError(
            f"The 'save' parameter of {caller}: SaveAt(every={save.every}) counts steps, but method="
            "'dopri5_systems' gives every system steps of its own (there is no common step to count). "
            "Pass SaveAt(ts=...) with the save times.")
    return save


def _check_options(stepper, method, t0, t1, dt, kappa, rtol, atol, max_steps, check_every, controller):
    """The times, step, noise amplitude and loop options, related to each other (each was checked alone by
    simulate's declaration)."""
    if t1 <= t0:
        raise InvalidParameterError(f"t1 must be greater than t0 = {t0:g}; got t1 = {t1:g}.")
    if dt is None:
        if not stepper.adaptive and controller is None:
            raise InvalidParameterError(f"method {method!r} is fixed-step: pass dt.")
        dt = (t1 - t0) / 100  # a first trial step; the controller decides from there
    if dt > t1 - t0 and not stepper.adaptive and controller is None:
        # a fixed step longer than the run would silently become one step of t1 - t0
        raise InvalidParameterError(
            f"dt = {dt:g} of simulate is longer than the run t1 - t0 = {t1 - t0:g}: method {method!r} takes fixed "
            f"steps, so it would take one step of {t1 - t0:g}. Pass dt <= {t1 - t0:g} (e.g. dt = {(t1 - t0) / 100:g}"
            ") or a later t1.")
    if np.isfinite(kappa) and not stepper.stochastic:
        raise InvalidParameterError(f"kappa={kappa:g} adds noise: use method='euler_maruyama' (got {method!r}).")
    sigma = float(np.sqrt(2.0 / kappa)) if np.isfinite(kappa) else 0.0
    if sigma * np.sqrt(dt) >= 1.0:  # every step would be refused as unresolved (a move > 1 rad): say why now
        raise InvalidParameterError(
            f"kappa = {kappa:g} with dt = {dt:g}: one step's noise moves a token by about sqrt(2 dt / kappa) = "
            f"{sigma * np.sqrt(dt):.3g} rad in each direction, more than a step may move (1 rad). Raise kappa (the "
            f"inverse noise strength) or lower dt below kappa / 2 = {kappa / 2:g} (e.g. dt = {kappa / 200:g}).")
    opts = dict(rtol=rtol, atol=atol, max_steps=max_steps, check_every=check_every)
    return t0, t1, dt, sigma, opts


def _check_controller(controller):
    if not all(callable(getattr(controller, name, None)) for name in ("first", "propose", "decide")):
        raise InvalidParameterError(
            f"controller of simulate must provide first, propose and decide (particles._dynamics.controllers); "
            f"got {type(controller).__name__}."
        )


@declare()
def tqdm_class() -> type:
    """The tqdm bar class every headflow progress bar uses: ``tqdm.auto``'s (a widget in Jupyter)
    when ipywidgets imports, else ``tqdm.std``'s (text), so that a kernel without ipywidgets
    shows a text bar instead of tqdm.auto's "IProgress not found" warning.

    Returns
    -------
    type
        ``tqdm.auto.tqdm`` or ``tqdm.std.tqdm``.
    """
    try:
        import ipywidgets  # noqa: F401  (only whether it imports matters)
    except ImportError:
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm
