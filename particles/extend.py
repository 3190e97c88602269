r"""The extension surface of ``particles``: what a numerical scheme or an analysis built on top of
it (``meanfield``, ``metrics``, a user's own package) uses besides the flat public names.

Everything here is public and stable in the sense of the rest of the API; the private
subpackages (``particles._core``, ``particles._dynamics``, ...) are not, and no other package
imports them (``tests/test_architecture.py`` checks it).

Run a scheme in the solve loop
    :class:`Stepper` (a step function with its order; ``simulate(..., method=Stepper(...))``),
    :class:`SchemeState` (the base of a field whose state is a scheme's own array),
    the step-size controllers :class:`ConstantStep`, :class:`PIDController`,
    :class:`CFLController`, and the Dormand–Prince 5(4) pair :data:`DORMAND_PRINCE`
    (a :class:`ButcherTableau`).
Size a blocked pass
    :func:`rows_per_block`, :func:`row_blocks` and the two budgets
    :data:`DEFAULT_BLOCK_ELEMENTS` (cache-bound logit tiles) and
    :data:`WORKING_MEMORY_ELEMENTS` (memory-bound temporaries).
Float64 facts and head structure
    :data:`LOG_OVERFLOW` (the largest log-weight that is exponentiated),
    :data:`ROUNDOFF_RTOL` and the tests built on it: :func:`scalar_of`, :func:`scalar_heads`,
    :func:`scaled_rotation_of`, :func:`is_symmetric`.
Attention kinds
    :class:`Kind` (a kind is one object carrying its passes, docs/architecture.md), its base
    :class:`ExponentialKind` for kinds of the exponential weights, :class:`Refusal` (a piece a kind
    does not have, with the route to take), :func:`register_kind` (enters a kind once, refusing one
    that lacks a piece of :data:`REQUIRED`), :class:`HeadSums` (what a pass returns) and
    :data:`ATTENTION_KINDS`, the registry every layer reads; :data:`MEAN_FIELD_KINDS`, the kinds the
    grid mean-field solvers, the closed forms and the studies implement (USA and softmax: those with
    a mean-field rule), and :data:`LAGRANGIAN_KINDS`, those whose pass takes weighted atoms (the
    Lagrangian scheme).
Model fields
    :data:`MODEL_FIELDS` and :data:`OPTION_FIELDS`, the declared rules of the constructor fields
    of :class:`~particles.MultiHead` (to declare a function taking the same options).
Geometry without validation
    :func:`unchecked_geodesic_distance`: the geodesic distance of :func:`particles.geodesic_distance`
    without its input checks, for a caller that validated its points (it broadcasts).
Fields
    :func:`field_fingerprint`: the short hash of a field's constructor fields that a
    :class:`~particles.Trajectory` keeps (``traj.fingerprint``), to refuse labelling a run with
    another model.
Files
    :func:`read_tensors` and :func:`require_extra` (trained weights, the ``trained`` extra),
    :data:`BIAS_MODES` (the bias treatments of :meth:`~particles.AttentionWeights.to_multihead`),
    :func:`unwritable` (the one writability check), :func:`read_bounded` (a file read up to a bound,
    devices and pipes included) and :func:`check_nesting` (JSON nested at most :data:`MAX_NESTING`
    levels, checked before it is parsed).

>>> from particles.extend import DORMAND_PRINCE, scalar_of
>>> DORMAND_PRINCE.order, DORMAND_PRINCE.stages, scalar_of(np.eye(2))
(5, 7, 1.0)
"""

from __future__ import annotations

import numpy as np

from ._core.blocking import DEFAULT_BLOCK_ELEMENTS, WORKING_MEMORY_ELEMENTS, row_blocks, rows_per_block
from ._core.files import MAX_NESTING, check_nesting, read_bounded, unwritable
from ._core.numerics import (
    LOG_OVERFLOW,
    ROUNDOFF_RTOL,
    is_symmetric,
    scalar_heads,
    scalar_of,
    scaled_rotation_of,
)
from ._core.sphere import _geodesic_distance
from ._dynamics.controllers import CFLController, ConstantStep, PIDController
from ._dynamics.field import SchemeState, field_fingerprint
from ._dynamics.steppers import Stepper
from ._dynamics.tableaux import DORMAND_PRINCE, ButcherTableau
from ._model.architectures import read_tensors, require_extra
from ._model.fields import MODEL_FIELDS, OPTION_FIELDS
from ._model.kind_families import ExponentialKind
from ._model.kinds import (
    ATTENTION_KINDS,
    LAGRANGIAN_KINDS,
    MEAN_FIELD_KINDS,
    REQUIRED,
    Kind,
    Refusal,
    register_kind,
)
from ._model.pretrained import BIAS_MODES
from ._summation.exact import HeadSums

__all__ = [
    "field_fingerprint",
    "BIAS_MODES",
    "Stepper",
    "SchemeState",
    "ConstantStep",
    "PIDController",
    "CFLController",
    "ButcherTableau",
    "DORMAND_PRINCE",
    "rows_per_block",
    "row_blocks",
    "DEFAULT_BLOCK_ELEMENTS",
    "WORKING_MEMORY_ELEMENTS",
    "LOG_OVERFLOW",
    "ROUNDOFF_RTOL",
    "scalar_of",
    "scalar_heads",
    "scaled_rotation_of",
    "is_symmetric",
    "Kind",
    "ExponentialKind",
    "Refusal",
    "register_kind",
    "REQUIRED",
    "HeadSums",
    "ATTENTION_KINDS",
    "MEAN_FIELD_KINDS",
    "LAGRANGIAN_KINDS",
    "MODEL_FIELDS",
    "OPTION_FIELDS",
    "unchecked_geodesic_distance",
    "read_tensors",
    "require_extra",
    "unwritable",
    "read_bounded",
    "check_nesting",
    "MAX_NESTING",
]


def unchecked_geodesic_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Geodesic distance :math:`2\arctan2(\|x - y\|, \|x + y\|)` of unit vectors along the last
    axis (accurate at 0 and π), without the checks of :func:`particles.geodesic_distance`;
    x and y broadcast against each other."""
    return _geodesic_distance(x, y)
