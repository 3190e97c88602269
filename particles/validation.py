"""Validation at the public boundary, shared by every headflow layer (the public face of
:mod:`particles._core.validation`, plus :func:`check_model`).

Public callables declare their parameters with :func:`declare` (a constraint per parameter,
:class:`Relation` between them): the declaration validates at the call, types the command line's
config keys and generates the bad-input suite. Contract: each checker either returns a clean float64 value (a contiguous array or a
Python float) or raises an :class:`InvalidParameterError` whose message names the
parameter, the caller, what was expected, what was received and how to fix it. Internal
code trusts what these functions return and never re-validates.
"""

from ._core.declarations import Relation, declaration, declare
from ._core.errors import LIBRARY_ERRORS, ConvergenceWarning, InvalidParameterError, SolverError
from ._core.params import (
    NONE,
    AnyOf,
    Array,
    Boolean,
    Constraint,
    Function,
    Instance,
    Integer,
    Interval,
    MappingOf,
    Options,
    SequenceOf,
)
from ._core.states import check_states, check_times
from ._core.validation import (
    check_bool,
    check_callable,
    check_choice,
    check_finite,
    check_instance,
    check_names,
    check_param,
    check_points,
    check_real_array,
    check_returned,
    check_rng,
    check_square_stack,
    check_weights,
)
from ._model.checks import check_model

__all__ = [
    "InvalidParameterError",
    "SolverError",
    "ConvergenceWarning",
    "LIBRARY_ERRORS",
    "check_points",
    "check_param",
    "check_choice",
    "check_names",
    "check_weights",
    "check_square_stack",
    "check_finite",
    "check_model",
    "check_states",
    "check_times",
    "check_real_array",
    "check_bool",
    "check_callable",
    "check_instance",
    "check_rng",
    "check_returned",
    # declarations (one rule per parameter: validation, CLI types, generated bad inputs)
    "declare",
    "declaration",
    "Constraint",
    "Interval",
    "Integer",
    "Options",
    "Boolean",
    "Instance",
    "Function",
    "SequenceOf",
    "AnyOf",
    "Array",
    "MappingOf",
    "Relation",
    "NONE",
]
