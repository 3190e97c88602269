"""Checks of model arguments (``model`` must be a MultiHead of an allowed kind and geometry)."""

from __future__ import annotations

import numpy as np

from .._core.errors import InvalidParameterError
from .._core.validation import _fmt
from .multihead import MultiHead

__all__ = ["check_model"]


def check_model(model, caller: str, *, kinds=None, symmetric: bool = False, geometries=None):
    r"""Validate that ``model`` is a :class:`~particles.MultiHead` of an allowed kind and geometry.

    ``symmetric=True`` also requires score symmetry :math:`M_h = M_h^\\top` (Condition 3),
    which the gradient-flow identities assume.
    """
    if not isinstance(model, MultiHead):
        raise InvalidParameterError(
            f"The 'model' parameter{_fmt(caller)} must be a particles.MultiHead; got {type(model).__name__}."
        )
    if kinds is not None and model.kind not in kinds:
        raise InvalidParameterError(
            f"The 'model' parameter{_fmt(caller)} must have kind in {sorted(kinds)}; got kind={model.kind!r}."
        )
    if geometries is not None and model.geometry not in geometries:
        raise InvalidParameterError(
            f"The 'model' parameter{_fmt(caller)} must have geometry in {sorted(geometries)}; "
            f"got geometry={model.geometry!r}."
        )
    if symmetric and not model.symmetric:
        asym = float(np.max(np.abs(model.M - model.M.transpose(0, 2, 1))))
        raise InvalidParameterError(
            f"M{_fmt(caller)} must be symmetric (Condition 3, M_h = M_h^T); got max |M_h - M_h^T| = {asym:.3g}. "
            "Use (M + M.transpose(0, 2, 1)) / 2."
        )
    return model
