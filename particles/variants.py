r"""Time-dependent weights and stacks of layers, built on the one field :class:`~particles.MultiHead`.

- :class:`TimeDependent`: a field ``field(t, x)`` whose heads are :math:`(M(t), W(t))` from a
  callable ``weights_fn(t) -> (M, W)``; every other option (β, kind, geometry, causal,
  update) is that of a template :class:`MultiHead`. Smooth in t, so any stepper keeps its order.
  For softmax heads with :math:`W(t) = a(t)W` the velocity scales by a(t), so the run is the
  constant-weight run at the time :math:`\tau(t) = \int_0^t a`.
- :func:`simulate_layers`: a stack of L layers (one :class:`MultiHead` each) applied for
  ``layer_time`` each, i.e. the piecewise-constant weights of a transformer with per-layer
  parameters; the flow of layer k is integrated on its own interval (no step straddles a
  layer boundary), so the result is the composition of the layer flows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import MultiHead
from .simulate import simulate
from .trajectory import SaveAt, Trajectory
from .validation import InvalidParameterError, check_model, check_param

__all__ = ["TimeDependent", "simulate_layers"]


@dataclass(frozen=True, eq=False)
class TimeDependent:
    """``field(t, x) = MultiHead(M(t), W(t), **options of template)(t, x)``.

    Parameters
    ----------
    weights_fn : callable t -> (M, W)
        Score and value matrices at time t, shapes (H, d, d) or (d, d) (validated at each
        call by :class:`MultiHead`).
    template : MultiHead
        Supplies β, kind, geometry, causal, update and log_time_scale.

    Examples
    --------
    >>> tmpl = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    >>> field = TimeDependent(lambda t: (np.eye(3), (1 + t) * np.eye(3)), tmpl)
    >>> field(0.0, np.eye(3)).shape
    (3, 3)
    """

    weights_fn: object
    template: MultiHead

    def __post_init__(self):
        if not callable(self.weights_fn):
            raise InvalidParameterError(
                f"The 'weights_fn' parameter of TimeDependent must be a callable t -> (M, W); "
                f"got {type(self.weights_fn).__name__}."
            )
        check_model(self.template, "TimeDependent")

    @property
    def geometry(self) -> str:
        return self.template.geometry

    def model_at(self, t: float) -> MultiHead:
        """The :class:`MultiHead` of the weights at time t."""
        out = self.weights_fn(t)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise InvalidParameterError(
                f"weights_fn of TimeDependent must return a pair (M, W); got {type(out).__name__} at t={t:g}."
            )
        tm = self.template
        M, W = out
        model = MultiHead(M, W, beta=tm.beta, kind=tm.kind, geometry=tm.geometry, log_time_scale=tm.log_time_scale,
                          block_elements=tm.block_elements, summation=tm.summation, tol=tm.tol, causal=tm.causal,
                          update=tm.update)
        if model.d != tm.d:
            # the tokens have the template's dimension: other matrices would fail deep inside a matmul
            raise InvalidParameterError(
                f"weights_fn of TimeDependent returned {model.d} x {model.d} matrices at t={t:g}, but the template "
                f"(and so the tokens) is {tm.d}-dimensional; return matrices of shape (H, {tm.d}, {tm.d})."
            )
        return model

    def __call__(self, t: float, x: np.ndarray) -> np.ndarray:
        return self.model_at(t)._velocity(x)


def simulate_layers(x0, layers, *, layer_time: float = 1.0, dt: float, method: str = "rk4",
                    n_saves_per_layer: int = 1) -> Trajectory:
    r"""Run a stack of layers: layer k acts on :math:`[k\tau, (k+1)\tau]`, τ = ``layer_time``.

    Parameters
    ----------
    x0 : ndarray of shape (n, d)
    layers : sequence of MultiHead
        Same d and geometry.
    layer_time : float > 0
    dt : float
        Step inside each layer (the last step of a layer lands on its end).
    method : str
        A fixed-step method of :func:`particles.simulate`.
    n_saves_per_layer : int >= 1
        Saved states per layer (after t0), equally spaced.

    Returns
    -------
    Trajectory
        Times 0, ..., Lτ; ``x`` of shape (1 + L n_saves_per_layer, n, d).
    """
    caller = "simulate_layers"
    if isinstance(layers, MultiHead):
        layers = [layers]
    else:
        try:
            layers = list(layers)
        except TypeError:
            raise InvalidParameterError(
                f"layers of {caller} must be a MultiHead or a sequence of MultiHead; got {type(layers).__name__}."
            ) from None
    if not layers:
        raise InvalidParameterError("layers of simulate_layers must hold at least one MultiHead.")
    for k, layer in enumerate(layers):
        check_model(layer, f"{caller} (layer {k})")
        if layer.d != layers[0].d or layer.geometry != layers[0].geometry:
            raise InvalidParameterError(
                f"layers of {caller} must share d and geometry: layer {k} has d={layer.d}, "
                f"geometry={layer.geometry!r}; layer 0 has d={layers[0].d}, geometry={layers[0].geometry!r}."
            )
    tau = check_param(layer_time, "layer_time", caller, low=0.0, low_open=True)
    n_saves = check_param(n_saves_per_layer, "n_saves_per_layer", caller, low=1, integer=True)
    x = layers[0].check_x(x0, "x0")
    times, states, steps = [0.0], [x], 0
    for k, layer in enumerate(layers):
        ts = k * tau + tau * np.arange(n_saves + 1) / n_saves
        ts[-1] = (k + 1) * tau
        traj = simulate(states[-1], layer, t0=float(ts[0]), t1=float(ts[-1]), dt=dt, method=method,
                        save=SaveAt(ts=ts))
        times.extend(traj.t[1:])
        states.extend(traj.x[1:])
        steps += traj.n_steps
    return Trajectory(t=np.asarray(times), x=np.stack(states), n_steps=steps, x_final=states[-1], method=method)
