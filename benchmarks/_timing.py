"""Timings that say where they were measured, and speed-ups only between comparable ones.

A published speed-up is the ratio of two columns. It means what it says only if both columns
were measured in the same process, under the same thread-pool limits, on a machine that was
equally loaded for both; an exact pass timed in another run while other jobs ran is not a
baseline. Each :class:`Timing` therefore records the process id, the thread-pool limits
(``threadpoolctl``) and the load average when it was taken, and :func:`ratio` refuses
(:class:`IncomparableTimings`) to divide two timings of different processes or limits.
:func:`header` prints the conditions above a table: CPUs, load averages at the first and
last timing, thread limits, and a warning when the machine was not idle.

Used by the ``bench_*.py`` scripts of this folder (``import _timing``; the folder is on
``sys.path`` when a script runs, and is put there for the subprocesses they start).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_info

__all__ = ["Timing", "IncomparableTimings", "thread_limits", "best_of", "ratio", "header", "IDLE_LOAD"]

#: 1-minute load average per CPU, beyond the timing process itself (one runnable thread under the
#: limits), above which a table is flagged as measured on a busy machine
IDLE_LOAD = 0.25


class IncomparableTimings(ValueError):
    """Two timings that were not measured in the same process under the same thread limits."""


def thread_limits() -> tuple:
    """Sorted ``(user_api, internal_api, num_threads)`` of every thread pool loaded in this process."""
    return tuple(sorted((p["user_api"], p["internal_api"], int(p["num_threads"])) for p in threadpool_info()))


def _load() -> tuple:
    try:
        return tuple(round(v, 2) for v in os.getloadavg())
    except OSError:  # not available on this platform
        return (float("nan"),) * 3


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds of one measurement, and where it was taken.

    ``extrapolated`` describes how ``seconds`` was scaled from what was measured (e.g.
    ``"x 90/9 betas"``); it is empty for a direct measurement. Extrapolation keeps the pid
    and limits of the measurement it came from: a ratio of two timings extrapolated from the
    same process is allowed, and the table marks the extrapolated column.
    """

    seconds: float
    pid: int
    limits: tuple
    load: tuple
    extrapolated: str = ""

    @classmethod
    def now(cls, seconds: float) -> Timing:
        """A timing just measured in this process, under its current thread limits."""
        return cls(float(seconds), os.getpid(), thread_limits(), _load())

    def scaled(self, factor: float, how: str) -> Timing:
        """This timing extrapolated by ``factor`` (``how`` says why, e.g. "as n^2 from n = 16384")."""
        note = f"{self.extrapolated}; {how}" if self.extrapolated else how
        return dataclasses.replace(self, seconds=self.seconds * float(factor), extrapolated=note)

    def to_dict(self) -> dict:
        """JSON-ready (for timings measured in a subprocess)."""
        return {"seconds": self.seconds, "pid": self.pid, "limits": [list(lim) for lim in self.limits],
                "load": list(self.load), "extrapolated": self.extrapolated}

    @classmethod
    def from_dict(cls, d: dict) -> Timing:
        return cls(float(d["seconds"]), int(d["pid"]), tuple(tuple(lim) for lim in d["limits"]),
                   tuple(d["load"]), str(d.get("extrapolated", "")))


def best_of(fn, repeat: int, *, warmup: bool = True) -> Timing:
    """Best wall time of ``repeat`` calls of ``fn()`` (after one untimed call if ``warmup``)."""
    if warmup:
        fn()
    times = []
    for _ in range(max(1, int(repeat))):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return Timing.now(min(times))


def ratio(numerator: Timing, denominator: Timing) -> float:
    """``numerator.seconds / denominator.seconds``, refused unless both timings are comparable.

    Raises
    ------
    IncomparableTimings
        When they come from different processes (a baseline timed in another run, under other
        load) or under different thread-pool limits.
    """
    if numerator.pid != denominator.pid:
        raise IncomparableTimings(
            f"timings of different processes (pid {numerator.pid} and {denominator.pid}): measure both sides "
            "in one process, one after the other, before printing their ratio."
        )
    if numerator.limits != denominator.limits:
        raise IncomparableTimings(
            f"timings under different thread limits ({numerator.limits} and {denominator.limits}): measure both "
            "sides under the same threadpool_limits."
        )
    return numerator.seconds / denominator.seconds


def try_ratio(numerator: Timing | None, denominator: Timing | None) -> float | None:
    """:func:`ratio`, or None when a side is missing or the two are not comparable."""
    if numerator is None or denominator is None:
        return None
    try:
        return ratio(numerator, denominator)
    except IncomparableTimings:
        return None


def header(timings, *, title: str = "") -> str:
    """Conditions of a table: CPUs, load averages over the run, thread limits, and a warning if busy."""
    timings = list(timings)
    ncpu = os.cpu_count() or 1
    loads = [t.load for t in timings if t.load and np.isfinite(t.load[0])]
    limits = sorted({lim for t in timings for lim in t.limits})
    lines = [title] if title else []
    lines.append(f"machine: {platform.machine()} {platform.system()}, {ncpu} CPUs, python "
                 f"{platform.python_version()}, numpy {np.__version__}")
    if loads:
        first, last = loads[0], loads[-1]
        worst = max(load[0] for load in loads)
        lines.append(f"load average (1/5/15 min): {first[0]:.2f}/{first[1]:.2f}/{first[2]:.2f} at the first timing, "
                     f"{last[0]:.2f}/{last[1]:.2f}/{last[2]:.2f} at the last; highest 1-min value {worst:.2f}")
        # the timed process is itself one runnable task: only load beyond it means other work
        if worst > 1.0 + IDLE_LOAD * ncpu:
            lines.append(f"WARNING: the machine was not idle (1-min load up to {worst:.2f} on {ncpu} CPUs): times "
                         "are upper bounds; re-measure on an idle machine before publishing.")
    lines.append("thread limits: "
                 + (", ".join(f"{api}/{internal}={n}" for api, internal, n in limits) or "none loaded"))
    pids = sorted({t.pid for t in timings})
    lines.append(f"timed in {len(pids)} process(es); a speed-up is printed only between columns timed in the same "
                 "process under the same limits")
    return "\n".join(lines)
