r"""Value misalignment (Theorem 12): how far the energy identity survives :math:`W_h \ne M_h`.

USA heads with symmetric scores (Condition 3, :math:`M_h = M_h^\top`) and value matrices
:math:`W_h = M_h + \Delta_h`. The energy :math:`E_{multi}` depends on the :math:`M_h` only,
its gradient is :math:`\nabla_{x_i}E = \frac1{n^2}\sum_h\sum_j e^{\beta s^h_{ij}} M_h x_j`, and
the velocity is :math:`v_i = n\nabla_{x_i}E + D_i/n` with the *misalignment force*

.. math:: D_i = \sum_h\sum_j e^{\beta s^h_{ij}}\,\Delta_h x_j .

Since :math:`\langle v_i, \dot x_i\rangle = \|\dot x_i\|^2` on the sphere
(:math:`\dot x_i = P_{x_i}v_i`) and in flat space, the rate splits exactly:

.. math:: \frac{dE}{dt} = \frac1n\sum_i\|\dot x_i\|^2 - \frac1{n^2}\sum_i\langle D_i, \dot x_i\rangle .

With :math:`\|D_i\| \le n\,\delta_V` and

.. math:: \delta_V = \sum_h \|\Delta_h\|_{op}\, R\, e^{\beta\|M_h\|_{op}R^2},
   \qquad R = \max_j\|x_j\| \;(=1 \text{ on the sphere}),

Cauchy–Schwarz gives the two lower bounds

.. math:: \frac{dE}{dt} \ge \frac1n\sum_i\|\dot x_i\|\,(\|\dot x_i\| - \delta_V)
          \ge -\frac{\delta_V^2}{4},

so the energy is non-decreasing wherever every token moves faster than :math:`\delta_V`,
and can never fall faster than :math:`\delta_V^2/4`. Replacing :math:`\delta_V` by the
token's own :math:`\|D_i\|/n` gives the sharper, state-dependent ``local_bound``.

Units: with ``model.log_time_scale = c`` the velocities, :math:`D_i` and :math:`\delta_V`
are all multiplied by :math:`e^{-c}` and rates by :math:`e^{-2c}` (as in
:func:`particles.diagnose`); every identity and bound holds in those units.

References
----------
arXiv:2605.04279, Theorem 12 (value misalignment).
"""

from __future__ import annotations

import numpy as np

from .._core.arrays import check_square_stack
from .._core.declarations import Relation, declare
from .._core.numerics import LOG_OVERFLOW
from .._core.params import NONE, AnyOf
from .._core.params_data import SquareStack
from .._core.validation import InvalidParameterError
from .._model.checks import Model, check_model, fits_model
from .._model.fields import MODEL_FIELDS, STATE
from .._model.multihead import MultiHead

__all__ = ["misaligned_model", "value_misalignment", "misalignment_rates", "misalignment_fn", "delta_v", "MISALIGNMENT"]

#: names and long names of the outputs of :func:`misalignment_rates`
MISALIGNMENT = {
    "energy_rate": "exact dE/dt = sum_i <grad_i E, dx_i/dt>",
    "kinetic": "(1/n) sum_i |dx_i/dt|^2",
    "misalignment_term": "(1/n^2) sum_i <D_i, dx_i/dt>",
    "split_residual": "energy_rate - (kinetic - misalignment_term)",
    "delta_v": "delta_V = sum_h |Delta_h| R exp(beta |M_h| R^2)",
    "speed_bound": "(1/n) sum_i |dx_i/dt| (|dx_i/dt| - delta_V)",
    "uniform_bound": "-delta_V^2 / 4",
    "local_bound": "(1/n) sum_i |dx_i/dt| (|dx_i/dt| - |D_i|/n)",
    "min_speed": "min_i |dx_i/dt|",
    "certified": "1 if min_speed >= delta_V (energy certified non-decreasing)",
}


_USA_SYM = Model(kinds=("usa",), symmetric=True)


@declare(M=MODEL_FIELDS["M"], Delta=SquareStack(), beta=MODEL_FIELDS["beta"], geometry=MODEL_FIELDS["geometry"],
         log_time_scale=MODEL_FIELDS["log_time_scale"],
         relations=[Relation(("Delta", "M"), lambda D, M: D.shape == M.shape,
                             "must hold one d x d matrix per head, the shape of M",
                             breaks={"Delta": np.zeros((2, 3, 3))})])
def misaligned_model(M, Delta, *, beta: float, geometry: str = "sphere", log_time_scale=0.0) -> MultiHead:
    r"""USA heads with symmetric scores :math:`M_h` and values :math:`W_h = M_h + \Delta_h`.

    Parameters
    ----------
    M : array_like of shape (H, d, d) or (d, d), symmetric
    Delta : array_like of the same shape as M
    beta : float in [0, inf)
    geometry : {"sphere", "flat"}
    log_time_scale : float or "auto"

    Examples
    --------
    >>> model = misaligned_model(np.eye(3), 0.1 * np.ones((3, 3)), beta=1.0)
    >>> bool(np.allclose(value_misalignment(model), 0.1))
    True
    """
    caller = "misaligned_model"
    M = check_square_stack(M, "M", caller=caller)
    D = check_square_stack(Delta, "Delta", d=M.shape[1], caller=caller)
    if D.shape != M.shape:
        raise InvalidParameterError(
            f"Delta of {caller} must have one d x d matrix per head, shape {M.shape}; got shape {np.shape(Delta)}."
        )
    model = MultiHead(M, M + D, beta=beta, kind="usa", geometry=geometry, log_time_scale=log_time_scale)
    check_model(model, caller, symmetric=True)
    return model


@declare(model=Model())
def value_misalignment(model: MultiHead) -> np.ndarray:
    r""":math:`\Delta_h = W_h - M_h`, shape (H, d, d) (zero under value alignment, Condition 4)."""
    check_model(model, "value_misalignment")
    return model.W - model.M


@declare(model=_USA_SYM, x=AnyOf(NONE, STATE), relations=[fits_model()])
def delta_v(model: MultiHead, x=None) -> float:
    r""":math:`\delta_V = e^{-c}\sum_h\|\Delta_h\|_{op} R\,e^{\beta\|M_h\|_{op}R^2}` (module docstring).

    ``x`` sets :math:`R = \max_j\|x_j\|` in flat space (ignored on the sphere, where R = 1);
    returns ``inf`` past the float64 range (use ``log_time_scale="auto"``).
    """
    check_model(model, "delta_v", kinds=("usa",), symmetric=True)
    R = 1.0
    if x is not None:
        x = model.check_x(x)  # validated even on the sphere, where it does not change R
    if not model.geom.on_sphere:
        if x is None:
            raise InvalidParameterError("delta_v of a flat model needs the state x (it sets R = max_j |x_j|).")
        R = float(np.max(np.linalg.norm(x, axis=1)))
    return _delta_v(model, R)


def _delta_v(model: MultiHead, R: float) -> float:
    dnorm = np.array([np.linalg.norm(D, 2) for D in model.W - model.M])
    mnorm = np.array([np.linalg.norm(M, 2) for M in model.M])
    with np.errstate(divide="ignore"):
        # a head with Δ_h = 0 contributes nothing: log 0 = -inf drops it, on purpose
        logs = np.log(dnorm * R) + model.beta * mnorm * R * R - model.log_time_scale
    top = float(np.max(logs))
    if top == -np.inf:
        return 0.0
    if top > LOG_OVERFLOW:
        return np.inf
    return float(np.sum(np.exp(logs)))


@declare(model=_USA_SYM, x=STATE, relations=[fits_model()])
def misalignment_rates(model: MultiHead, x) -> dict:
    r"""The exact rate split and both lower bounds of Theorem 12 at state ``x``.

    Parameters
    ----------
    model : MultiHead
        USA heads with symmetric :math:`M_h` (any :math:`W_h`; see :func:`misaligned_model`).
    x : ndarray of shape (n, d)

    Returns
    -------
    dict
        The keys of :data:`MISALIGNMENT`: ``energy_rate`` (computed from
        :meth:`MultiHead.energy_gradient`, independently of the split), ``kinetic``,
        ``misalignment_term``, ``split_residual`` (zero to round-off), ``delta_v``,
        ``speed_bound``, ``uniform_bound``, ``local_bound``, ``min_speed``, ``certified``.
        Always ``energy_rate >= local_bound >= speed_bound >= uniform_bound``.

    Examples
    --------
    >>> model = misaligned_model(np.eye(3), 0.05 * np.eye(3)[[1, 2, 0]], beta=1.0)
    >>> out = misalignment_rates(model, np.eye(3))
    >>> bool(abs(out["split_residual"]) < 1e-14 and out["energy_rate"] >= out["uniform_bound"])
    True
    """
    check_model(model, "misalignment_rates", kinds=("usa",), symmetric=True)
    return _rates(model, model.check_x(x), None)


def _delta_model(model: MultiHead) -> MultiHead:
    """Same scores and units, values Δ_h: its head outputs summed over h are D_i (times e^{-c})."""
    return MultiHead(model.M, model.W - model.M, beta=model.beta, kind="usa", geometry=model.geometry,
                     log_time_scale=model.log_time_scale, block_elements=model.block_elements,
                     summation=model.summation, tol=model.tol)


def _rates(model: MultiHead, x: np.ndarray, dmodel: MultiHead | None) -> dict:
    n = x.shape[0]
    dmodel = _delta_model(model) if dmodel is None else dmodel
    xdot = model.velocity(x)
    grad = model.energy_gradient(x)
    D = dmodel.head_outputs(x).sum(axis=0)
    speed = np.linalg.norm(xdot, axis=1)
    R = 1.0 if model.geom.on_sphere else float(np.max(np.linalg.norm(x, axis=1)))
    dv = _delta_v(model, R)
    out = {
        "energy_rate": float(np.sum(grad * xdot)),
        "kinetic": float(np.sum(speed**2) / n),
        "misalignment_term": float(np.sum(D * xdot) / n**2),
    }
    out["split_residual"] = out["energy_rate"] - (out["kinetic"] - out["misalignment_term"])
    out["delta_v"] = dv
    out["speed_bound"] = float(np.sum(speed * (speed - dv)) / n) if np.isfinite(dv) else -np.inf
    out["uniform_bound"] = -dv * dv / 4
    out["local_bound"] = float(np.sum(speed * (speed - np.linalg.norm(D, axis=1) / n)) / n)
    out["min_speed"] = float(speed.min())
    out["certified"] = int(out["min_speed"] >= dv)
    return out


@declare(model=_USA_SYM)
def misalignment_fn(model: MultiHead):
    """A ``save_fn(t, x) -> dict`` computing :func:`misalignment_rates` (for ``SaveAt(fn=...)``)."""
    check_model(model, "misalignment_fn", kinds=("usa",), symmetric=True)
    dmodel = _delta_model(model)

    def save_fn(t, x):
        return _rates(model, x, dmodel)

    return save_fn
