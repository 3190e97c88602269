r"""Time-dependent weights, built on the one field :class:`~particles.MultiHead`.

- :class:`TimeDependent`: a field ``field(t, x)`` whose heads are :math:`(M(t), W(t))` from a
  callable ``weights_fn(t) -> (M, W)``; every other option (β, kind, geometry, causal,
  update) is that of a template :class:`MultiHead`. Smooth in t, so any stepper keeps its order.
  For softmax heads with :math:`W(t) = a(t)W` the velocity scales by a(t), so the run is the
  constant-weight run at the time :math:`\tau(t) = \int_0^t a`.

Stacks of layers (piecewise-constant weights) are :func:`particles.simulate_layers`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.arrays import check_square_stack
from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._core.params import Function
from .checks import Model
from .multihead import MultiHead

__all__ = ["TimeDependent"]


@declare(weights_fn=Function("a callable t -> (M, W)"), template=Model())
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

    @property
    def geometry(self) -> str:
        """The template's geometry: the field integrates where its models live."""
        return self.template.geometry

    @property
    def geom(self):
        return self.template.geom

    def check_x(self, x, name: str = "x") -> np.ndarray:
        """Validate a state against the template (shape (n, d), on its geometry)."""
        return self.template.check_x(x, name)

    def model_at(self, t: float) -> MultiHead:
        """The :class:`MultiHead` of the weights at time t."""
        out = self.weights_fn(t)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise InvalidParameterError(
                f"weights_fn of TimeDependent must return a pair (M, W); got {type(out).__name__} at t={t:g}."
            )
        tm = self.template
        # the returned matrices are named by the call that made them (not by MultiHead.replace below)
        M, W = (a if a is None else check_square_stack(a, f"{n} = weights_fn({t:g})[{i}]", caller="TimeDependent")
                for i, (n, a) in enumerate(zip("MW", out)))  # (W None: W = M, as in MultiHead)
        # every other field of the template carries over (replace is generated from the fields)
        try:
            model = tm.replace(M=M, W=W)
        except InvalidParameterError as exc:  # (replace's message would name replace's M, not the user's callable)
            raise InvalidParameterError(
                f"weights_fn of TimeDependent returned unusable matrices at t={t:g}: {exc} Make weights_fn(t) "
                "return finite arrays (M, W) of shape (H, d, d) at every time of the run."
            ) from None
        if model.d != tm.d:
            # the tokens have the template's dimension: other matrices would fail deep inside a matmul
            raise InvalidParameterError(
                f"weights_fn of TimeDependent returned {model.d} x {model.d} matrices at t={t:g}, but the template "
                f"(and so the tokens) is {tm.d}-dimensional; return matrices of shape (H, {tm.d}, {tm.d})."
            )
        return model

    def __call__(self, t: float, x: np.ndarray) -> np.ndarray:
        return self.model_at(t)._velocity(x)
