"""The constraints of the declarations (:mod:`particles.validation`): each accepts its domain and
refuses what it derives, declarations convert once and check relations, the check_* helpers are
the constraints, and the command line's config keys are the declarations' constraints in their
strict TOML mode. The generated bad-input suite that runs every declaration's invalid values is
``tests/test_bad_input.py``.
"""

import math
import re

import numpy as np
import pytest

from headflow import _config
from particles.validation import (
    NONE,
    AnyOf,
    Boolean,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Options,
    Relation,
    SequenceOf,
    declaration,
    declare,
)
from tests.helpers import garbled


@pytest.mark.parametrize("message, param, verdict", [
    ('The The "\'lambdas\' parameter" parameter of f must be finite', "lambdas", "repeats the word 'The'"),
    ("The 'x' parameter of f: The 'x' parameter must be finite", "x", "quotes 'x' twice"),
    ("The 'x' parameter of f must be finite; got 1 NaN.", "x", ""),
    ("The 'M' parameter of f must be 2 x 2 to match W; got 'M' of shape (3, 3)", "M", ""),
    ("The 'x' parameter of f must be a list, e.g. ['a', 'a']; got ['b', 'b']", "x", ""),
    ("The 'W' parameter of f must have shape (d, d) or (H, d, d) with n n rows", "W", "repeats the word 'n'"),
])
def test_the_garbling_check_can_fail(message, param, verdict):
    assert garbled(message, param).startswith(verdict)


# ------------------------------------------------------------------ the constraints themselves


@pytest.mark.parametrize("constraint, good", [
    (Interval(0, None, closed="neither"), [1e-300, 1.0, 5, np.float32(2.0), np.int64(3)]),
    (Interval(0, 1, closed="both"), [0, 0.0, 1, 0.5]),
    (Interval(0, None, closed="neither", inf=True), [np.inf, 2.0]),
    (Integer(2), [2, 3, np.int32(7), 4.0]),
    (Options("a", "b"), ["a", "b"]),
    (Boolean(), [True, False, np.bool_(True)]),
    (SequenceOf(Integer(1), min_len=2, increasing=True), [[1, 2], (3, 9, 27), np.array([4, 8])]),
    (AnyOf(NONE, Integer(1)), [None, 1, 10**6]),
    (Instance(dict), [{}, {"a": 1}]),
])
def test_constraints_accept_their_domain_and_refuse_what_they_derive(constraint, good):
    for value in good:
        constraint.check(value, "p", "f")
    bad = constraint.invalid()
    assert len(bad) >= 4
    for value in bad:
        with pytest.raises(InvalidParameterError, match=r"'p(\[\d+\])?' parameter of f"):  # (or its entry p[1])
            constraint.check(value, "p", "f")


def test_interval_ends_are_exact():
    half_open = Interval(0.0, 1.0, closed="right")
    assert not half_open.accepts(0.0) and half_open.accepts(1.0) and half_open.accepts(math.nextafter(0.0, 1.0))
    assert not half_open.accepts(math.nextafter(1.0, 2.0))
    assert Integer(1).convert(np.int64(3)) == 3 and type(Integer(1).convert(4.0)) is int
    assert not Integer(0).accepts(10**400) and not Integer(0).accepts(2.5)


def test_declare_converts_once_and_checks_relations():
    calls = []

    @declare(n=Integer(1), t1=Interval(0, None, closed="neither"), dt=Interval(0, None, closed="neither"),
             relations=[Relation(("dt", "t1"), lambda dt, t1: dt <= t1, "must be <= t1", breaks={"dt": 2, "t1": 1})])
    def run(n, *, t1=1.0, dt=0.1):
        calls.append((n, t1, dt))
        return n

    assert run(np.int64(3), t1=2) == 3 and calls == [(3, 2.0, 0.1)]
    assert type(calls[0][0]) is int and type(calls[0][1]) is float  # converted before the body runs
    with pytest.raises(InvalidParameterError, match=r"'dt' parameter of run: must be <= t1; got dt = 2"):
        run(1, dt=2.0)
    with pytest.raises(InvalidParameterError, match="run: .*unexpected keyword argument 'typo'"):
        run(1, typo=3)
    assert len(calls) == 1  # refused calls never reach the body
    with pytest.raises(TypeError, match="has no parameter"):
        declare(nope=Integer(0))(lambda n: n)


# ------------------------------------------------------------------ the command line shares the rules


def _toml_expressible(value) -> bool:
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return abs(value) < 2**63
    if isinstance(value, float):
        return not math.isnan(value)
    if isinstance(value, list):
        return all(_toml_expressible(v) for v in value)
    return False


@pytest.mark.parametrize("section", sorted(_config._DECLARED), ids=lambda s: f"{s[0]}.{s[1]}")
def test_cli_keys_are_their_declarations_in_strict_mode(section):
    """A config key is typed by the very constraint of the parameter it feeds (one rule), checked in the
    strict mode of TOML values: whatever the declaration refuses, the key refuses, worded with its key path."""
    module, fn, keys = _config._DECLARED[section]
    types = _config.TYPES[section[0]][section[1]]
    declared = declaration(getattr(__import__(module, fromlist=["_"]), fn)).constraints
    n_checked = 0
    for key in keys:
        assert types[key] is declared[key]
        where = f"[{section[1]}]"
        for bad in filter(_toml_expressible, declared[key].invalid()):
            with pytest.raises(InvalidParameterError, match=re.escape(f"{where}.{key}")):
                types[key].check(bad, key, where)
            n_checked += 1
        default = _config.SCHEMAS[section[0]][section[1]][key]
        if default is not None:
            types[key].check(default, key, where)
    assert n_checked >= 3 * len(keys)


def test_strict_mode_refuses_what_toml_cannot_mean():
    # an integral float is an integer in Python (4.0 -> 4) but a float in TOML; a tuple or an array is no TOML list
    assert Integer(1).check(4.0, "n", "f") == 4
    for rule, value in ((Integer(1), 4.0), (SequenceOf(Integer(1)), (1, 2)), (SequenceOf(Interval()), np.ones(2))):
        assert rule.accepts(value) and not rule.accepts(value, strict=True)
        with pytest.raises(InvalidParameterError, match=r"^\[run\]\.n must be"):
            rule.check(value, "n", "[run]")
    with pytest.raises(InvalidParameterError, match=r"^\[study\]\.n_values\[1\] must be an integer in \[1, inf\); "
                                                    r"got '64' \(str\)\. Write 64 without quotes\.$"):
        SequenceOf(Integer(1)).check([16, "64"], "n_values", "[study]")
