"""The benchmarks' timing helper (benchmarks/_timing.py): a speed-up only between comparable timings."""

import importlib.util
import json
import os
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "_timing.py"
_spec = importlib.util.spec_from_file_location("_timing", _PATH)
timing = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("_timing", timing)  # dataclasses resolve the module of their class
_spec.loader.exec_module(timing)

LIMITS = (("blas", "openblas", 1),)


def _t(seconds, pid=100, limits=LIMITS, load=(0.1, 0.1, 0.1)):
    return timing.Timing(seconds, pid, limits, load)


def test_ratio_of_comparable_timings():
    assert timing.ratio(_t(3.0), _t(1.5)) == 2.0
    # an extrapolation keeps where it was measured: allowed against a timing of the same process
    assert timing.ratio(_t(1.0).scaled(16.0, "as n^2 from n = 1000"), _t(2.0)) == 8.0


@pytest.mark.parametrize("other, reason", [
    (_t(1.0, pid=101), "different processes"),
    (_t(1.0, limits=(("blas", "openblas", 2),)), "different thread limits"),
])
def test_ratio_refuses_incomparable_timings(other, reason):
    with pytest.raises(timing.IncomparableTimings, match=reason):
        timing.ratio(_t(1.0), other)
    assert timing.try_ratio(_t(1.0), other) is None
    # an extrapolated baseline from another process (the exact column of another run) is refused too
    with pytest.raises(timing.IncomparableTimings):
        timing.ratio(other.scaled(100.0, "as n^2"), _t(1.0))


def test_timing_round_trips_through_json_and_records_this_process():
    t = timing.best_of(lambda: sum(range(100)), 2)
    assert t.pid == os.getpid() and t.limits == timing.thread_limits() and t.seconds >= 0
    back = timing.Timing.from_dict(json.loads(json.dumps(t.scaled(4.0, "x 4").to_dict())))
    assert back == t.scaled(4.0, "x 4")


def test_header_flags_a_busy_machine():
    ncpu = os.cpu_count() or 1
    idle = timing.header([_t(1.0, load=(0.0, 0.0, 0.0))])
    busy = timing.header([_t(1.0, load=(ncpu * 1.0, 0.5, 0.5))])
    assert "WARNING" not in idle and "WARNING: the machine was not idle" in busy
    assert "blas/openblas=1" in idle and "load average" in idle
