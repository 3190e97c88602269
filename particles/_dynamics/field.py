"""The field protocol of the solve loop: every field states its geometry.

A field is any object with

1. ``geometry``: ``"sphere"`` or ``"flat"`` (a key of :data:`~particles.GEOMETRIES`), and
   ``geom``, that :class:`~particles._core.sphere.Geometry`;
2. ``check_x(x, name) -> ndarray``: validates a state (shape, finiteness, on the manifold);
3. ``__call__(t, x) -> ndarray``: the velocity at a validated state, same shape as x;
4. optionally ``after_step(t, x)``: called by the loop at t0 and after every accepted step, so a
   field can change what it computes from there on (an ensemble whose settled systems stop
   moving: :meth:`particles.Ensemble.settling`);
5. optionally ``systems(idx)``: for a stack of independent systems (S, n, d), the velocity
   ``v(ts, xs)`` of the systems ``idx`` alone at their own times (``"dopri5_systems"`` steps
   each system on its own with it), and ``spectral_radius(t, x)``: a bound on the spectral
   radius of the velocity's Jacobian (``"rkc"`` chooses its stages from it);
6. optionally ``reads_state_only = True``: the field keeps no reference to the state it is called
   with and caches nothing by its identity, so ``"rk4"`` may pass its stage states in reused
   buffers (fields that cache their last evaluation by identity must not set it);
7. optionally ``writes_into = True``: ``__call__(t, x, out=buf)`` may write the velocity into
   ``buf`` (an array of x's shape) and return it, so ``"rk4"`` keeps its stage velocities in a
   reused buffer too (a fresh state-sized array per stage costs a page fault per page in a
   process whose allocator gives freed memory back: ~15 % of a step of 2048 circle systems).
   The caller uses the returned array, which may be another one.

:class:`~particles.MultiHead`, :class:`~particles.Ensemble` and :class:`~particles.TimeDependent`
are fields. A plain callable ``f(t, x)`` becomes one through :class:`CallableField`, which
states the geometry it was given (default the sphere) and checks the first velocity it
returns; the solver never guesses a geometry from a type.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from .._core.arrays import check_points, check_returned
from .._core.errors import InvalidParameterError
from .._core.sphere import GEOMETRIES
from .._core.validation import check_choice

__all__ = ["CallableField", "SchemeState", "as_field", "field_fingerprint"]


@dataclass(frozen=True, eq=False)
class CallableField:
    """A plain callable ``fn(t, x) -> (n, d)`` on a stated geometry.

    >>> f = CallableField(lambda t, x: np.zeros_like(x), "sphere")
    >>> f.check_x(np.eye(3)).shape
    (3, 3)
    """

    fn: object
    geometry: str = "sphere"

    def __post_init__(self):
        check_choice(self.geometry, "geometry", GEOMETRIES, "simulate")

    @property
    def geom(self):
        return GEOMETRIES[self.geometry]

    def check_x(self, x, name: str = "x") -> np.ndarray:
        return check_points(x, name, "simulate", on_sphere=self.geom.on_sphere, min_d=1)

    def probe(self, t0: float, x0: np.ndarray) -> None:
        """Check the return of one call: a (1, d) or (n,) velocity would be broadcast silently."""
        check_returned(self.fn(t0, x0), "field(t0, x0)", x0.shape, "simulate",
                       fix="The field must return one velocity row per token.")

    def __call__(self, t, x):
        return self.fn(t, x)


class SchemeState:
    """Base of a field whose state is a numerical scheme's own array (cell masses, spectral
    coefficients): flat geometry, and the scheme that built the state has validated it, so
    ``check_x`` passes it through. Subclasses define ``__call__(t, state)``."""

    geometry = "flat"
    geom = GEOMETRIES["flat"]

    def check_x(self, x, name: str = "x") -> np.ndarray:
        return x


def as_field(field, geometry: str | None = None, caller: str = "simulate"):
    """``field`` as a field of the protocol; ``geometry`` must agree with a field's own.

    A field (an object with ``geometry`` and ``check_x``) keeps its geometry: passing a
    different one is an error. A plain callable runs on ``geometry`` (default "sphere").
    """
    if hasattr(field, "geometry") and hasattr(field, "check_x") and callable(field):
        if geometry is not None and geometry != field.geometry:
            raise InvalidParameterError(
                f"geometry={geometry!r} of {caller} conflicts with the field's geometry {field.geometry!r}; omit it."
            )
        return field
    if callable(field):
        return CallableField(field, "sphere" if geometry is None else geometry)
    raise InvalidParameterError(
        f"field of {caller} must be a MultiHead, an Ensemble or a callable field(t, x); got {type(field).__name__}."
    )


def field_fingerprint(field) -> str:
    """A short SHA-256 of a field's constructor fields (a dataclass field such as
    :class:`~particles.MultiHead`: its arrays' bytes and shapes, its scalars and options), or ""
    for a field that is not a dataclass (a plain callable, a scheme's state): then nothing can
    be compared. Two fields with equal fingerprints compute the same velocities.

    >>> from particles import MultiHead
    >>> a = MultiHead.scalar([1.0], d=3, beta=2.0)
    >>> field_fingerprint(a) == field_fingerprint(a.replace(beta=2.0)), field_fingerprint(a) == field_fingerprint(
    ...     a.replace(beta=9.0))
    (True, False)
    """
    if not dataclasses.is_dataclass(field) or isinstance(field, type):
        return ""
    h = hashlib.sha256(type(field).__name__.encode())
    for f in dataclasses.fields(field):
        if not f.init:
            continue
        value = getattr(field, f.name)
        h.update(f.name.encode())
        if isinstance(value, np.ndarray):
            h.update(repr((value.shape, value.dtype.str)).encode())
            h.update(np.ascontiguousarray(value).tobytes())
        else:
            h.update(repr(value).encode())
    return h.hexdigest()[:16]
