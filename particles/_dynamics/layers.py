r"""Stacks of layers: piecewise-constant weights, one :class:`~particles.MultiHead` per layer.

:func:`simulate_layers` applies L layers for ``layer_time`` each (the weights of a
transformer with per-layer parameters); the flow of layer k is integrated on its own
interval (no step straddles a layer boundary), so the result is the composition of the
layer flows.
"""

from __future__ import annotations

import numpy as np

from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._core.params import AnyOf, Integer, Interval, Options, SequenceOf
from .._core.params_data import Points
from .._core.validation import check_param
from .._model.checks import Model, check_model
from .._model.multihead import MultiHead
from .saving import SaveAt, Trajectory
from .solve import simulate
from .steppers import STEPPERS

__all__ = ["simulate_layers"]


@declare(x0=Points(on_sphere=False, min_d=1), layers=AnyOf(Model(), SequenceOf(Model())),
         layer_time=Interval(0, None, closed="neither"), dt=Interval(0, None, closed="neither"),
         method=Options(*STEPPERS), n_saves_per_layer=Integer(1))
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
