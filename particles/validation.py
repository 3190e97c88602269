"""Validation at the public boundary, shared by every headflow layer (the public face of
:mod:`particles._core.validation`, plus :func:`check_model`).

Public callables declare their parameters with :func:`declare` (a constraint per parameter,
:class:`Relation` between them): the declaration validates at the call, types the command line's
config keys and generates the bad-input suite. Contract: each checker either returns a clean float64
value (a contiguous array or a Python float) or raises an :class:`InvalidParameterError` whose message names the
parameter, the caller, what was expected, what was received and how to fix it. Internal
code trusts what these functions return and never re-validates.
"""

from ._core import arrays as _a
from ._core import validation as _v
from ._core.arrays import (
    check_finite,
    check_integers,
    check_real_array,
    check_returned,
    check_scale,
    check_square_stack,
    check_varies,
    check_within,
)
from ._core.declarations import Declaration, Relation, declaration, declare
from ._core.errors import LIBRARY_ERRORS, ConvergenceWarning, InvalidParameterError, SolverError, StabilityWarning
from ._core.keywords import keyword_only
from ._core.params import (
    KAPPA,
    NONE,
    AnyOf,
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
from ._core.params_data import Array, Checked, Points, Seed, SquareStack, States, Weights, one_per, weights_or_uniform
from ._core.states import check_states, check_times
from ._core.validation import check_bool, check_callable, check_choice, check_instance, check_names, check_rng
from ._model.checks import POSITIVE_BETA, Model, check_model, fits_model

# the checkers' own options, declared (the internal code calls the undecorated functions)
_TEXT = dict(name=Instance(str, what="a str (the name the message gives the value)"),
             caller=Instance(str, what="a str (the caller the message names, or '')"))
_BOUND = AnyOf(NONE, Interval())
_ANY = Instance(object, what="any value (the one checked)")
check_param = declare(
    **_TEXT, value=_ANY, low=_BOUND, high=_BOUND, low_open=Boolean(), high_open=Boolean(), integer=Boolean(),
    allow_inf=Boolean(),
    relations=[Relation(("high", "low"), lambda hi, lo: hi is None or lo is None or hi >= lo, "must be >= low",
                        breaks={"low": 1.0, "high": 0.0})])(_v.check_param)
check_points = declare(**_TEXT, x=_ANY, on_sphere=Boolean(), atol=Interval(0, None), min_d=Integer(1), min_n=Integer(0),
                       d=AnyOf(NONE, Integer(1)))(_a.check_points)
check_weights = declare(**_TEXT, weights=_ANY, n=Integer(1))(_a.check_weights)

__all__ = [
    "InvalidParameterError",
    "SolverError",
    "ConvergenceWarning",
    "StabilityWarning",
    "LIBRARY_ERRORS",
    "check_points",
    "check_param",
    "check_choice",
    "check_names",
    "check_weights",
    "check_square_stack",
    "check_varies",
    "check_integers",
    "check_within",
    "check_scale",
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
    "Declaration",
    "declaration",
    "keyword_only",
    "Constraint",
    "Interval",
    "KAPPA",
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
    "Checked",
    "Points",
    "States",
    "SquareStack",
    "Weights",
    "Seed",
    "Model",
    "fits_model",
    "one_per",
    "weights_or_uniform",
    "POSITIVE_BETA",
]
