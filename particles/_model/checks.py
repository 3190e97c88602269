"""Checks of model arguments (``model`` must be a MultiHead of an allowed kind and geometry)."""

from __future__ import annotations

import numpy as np

from .._core.declarations import Relation
from .._core.errors import InvalidParameterError
from .._core.params_data import Checked
from .._core.validation import _fmt
from .multihead import MultiHead

__all__ = ["check_model", "Model", "fits_model", "POSITIVE_BETA"]


def check_model(model, caller: str, *, kinds=None, symmetric: bool = False, geometries=None, name: str = "model",
                aligned: str | None = None):
    r"""Validate that ``model`` is a :class:`~particles.MultiHead` of an allowed kind and geometry.

    ``symmetric=True`` also requires score symmetry :math:`M_h = M_h^\\top` (Condition 3),
    which the gradient-flow identities assume; ``aligned`` (the fix to name otherwise) requires
    value alignment :math:`W_h = M_h` (Condition 4).
    """
    if not isinstance(model, MultiHead):
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a particles.MultiHead; got {type(model).__name__}."
        )
    if kinds is not None and model.attention.name not in kinds:  # (a kind with parameters: its name)
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must have kind in {sorted(kinds)}; got kind={model.kind!r}."
        )
    if geometries is not None and model.geometry not in geometries:
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must have geometry in {sorted(geometries)}; "
            f"got geometry={model.geometry!r}."
        )
    if symmetric and not model.symmetric:
        asym = float(np.max(np.abs(model.M - model.M.transpose(0, 2, 1))))
        raise InvalidParameterError(
            f"M{_fmt(caller)} must be symmetric (Condition 3, M_h = M_h^T); got max |M_h - M_h^T| = {asym:.3g}. "
            "Use (M + M.transpose(0, 2, 1)) / 2."
        )
    if aligned is not None and not model.aligned:
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be value-aligned (Condition 4, W_h = M_h); {aligned}"
        )
    return model


def Model(*, kinds=None, symmetric: bool = False, geometries=None, hint: str = "") -> Checked:
    """The declared form of :func:`check_model`: a MultiHead (of the given kinds, geometries, symmetry)."""
    what = "a particles.MultiHead" + (f" of kind in {sorted(kinds)}" if kinds else "")
    bad = [None, "model", 3, np.eye(3)] + ([MultiHead(np.triu(np.ones((3, 3))))] if symmetric else [])

    def check(value, name, caller):
        return check_model(value, caller, kinds=kinds, symmetric=symmetric, geometries=geometries, name=name)

    return Checked(check, what, bad, hint=hint)


class _Fits(Relation):
    """State ``names[0]`` fits model ``names[1]`` (:meth:`MultiHead.check_x`, whose message it keeps)."""

    def check(self, values: dict, caller: str) -> None:
        x, model = (values.get(n) for n in self.names)
        if x is None or not hasattr(model, "check_x"):
            return
        try:
            model.check_x(x, self.names[0])
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"The {self.names[0]!r} parameter of {caller}: {exc}") from None


def fits_model(name: str = "x", model: str = "model") -> Relation:
    """The relation "state ``name`` has the model's d columns (and unit rows on the sphere)"
    (:meth:`MultiHead.check_x`); an absent state (None) fits."""
    return _Fits((name, model), None, "must fit the model", breaks={name: np.full((5, 4), 0.5)})


#: the relation "the model's beta is positive" of the energies (E = (1/2 beta) sum e^{beta s} is +inf at beta = 0)
POSITIVE_BETA = Relation(("model",), lambda m: m.beta > 0, "needs beta > 0 (the energy is +inf at beta = 0)",
                         breaks={"model": MultiHead.scalar([1.0], d=3, beta=0.0, kind="usa")})
