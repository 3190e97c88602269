"""The time a ``headflow simulate`` config implies, estimated before the run starts.

One step of the config's model and method, and one save's diagnostics, are timed on this machine
at two small numbers of tokens (at most :data:`CALIBRATION_N`, 1/16 of it on the exact pass) and
extrapolated to the config's ``n`` by how the summation of its heads grows: as n for the fast
routes (``summation = "auto"`` or ``"fast"`` with a NUFFT library and heads that have a route), as
n² for the exact pass (``"exact"``, the ReLU kinds, heads of rank > 3, or no NUFFT library). The
run takes about ``t1 / dt`` steps (an adaptive method's count may differ) and ``n_saves`` saves.

- Beyond ``[run] max_hours`` (default 24) the run is refused, naming the key that makes it long.
- Beyond :data:`NOTE_SECONDS` per step, or :data:`NOTE_TOTAL_SECONDS` in all, the estimate is
  printed before the run starts (the progress bar then moves once per step).

The estimate is a forecast from a few milliseconds-to-seconds of timing on a machine that may be
busy: it is good to a small factor, enough to tell minutes from days.
"""

from __future__ import annotations

import math
import time

from ._config import SCHEMAS, ConfigError

__all__ = ["CALIBRATION_N", "NOTE_SECONDS", "NOTE_TOTAL_SECONDS", "summation_growth", "estimate_simulate",
           "check_simulate_time"]

#: the largest number of tokens timed on a fast route (at an eighth of it and at it; 1/16 of it on the exact pass)
CALIBRATION_N = 32768
#: above this estimated time per step (seconds) the estimate is printed before the run
NOTE_SECONDS = 2.0
#: above this estimated total (seconds) the estimate is printed before the run
NOTE_TOTAL_SECONDS = 60.0


def summation_growth(model) -> tuple[int, str]:
    """(p, why): a step of ``model`` costs about a + b n^p, p = 1 on the fast routes, 2 on the exact pass."""
    from particles.extend import ATTENTION_KINDS
    from particles.summation import fast_available, fast_route

    if ATTENTION_KINDS[model.kind].sums != "exp":
        return 2, f"the {model.kind} kind's pass over all pairs, O(n^2)"
    if model.summation == "exact":
        return 2, 'summation = "exact", O(n^2)'
    if not fast_available():
        return 2, "the exact pass, O(n^2) (no NUFFT library for the fast route: pip install finufft)"
    for h in range(model.n_heads):
        route = fast_route(model.beta * model.M[h], model.geom.on_sphere)
        if route.route is None:
            return 2, f"the exact pass, O(n^2) (head {h} has no fast route: {route.reason})"
    return 1, "the fast summation route, O(n log n)"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _fit(n_small: int, t_small: float, n_big: int, t_big: float, p: int, n: int) -> float:
    """t(n) of t = a + b n^p through the two timings (a, b >= 0)."""
    if n <= n_big:
        return t_big
    b = max(t_big - t_small, 0.0) / (n_big**p - n_small**p)
    a = max(t_big - b * n_big**p, 0.0)
    return a + b * float(n) ** p


def estimate_simulate(cfg: dict, model, out=print) -> dict:
    """Seconds per step, per save and in all of a simulate config (module docstring), with what they rest on."""
    import numpy as np

    import particles

    run = cfg["run"]
    n, t1, dt = int(run["n"]), float(run["t1"]), float(run["dt"])
    p, why = summation_growth(model)
    n_big = min(n, CALIBRATION_N if p == 1 else CALIBRATION_N // 16)
    n_small = max(n_big // 8, 2)
    if n > n_big:  # the timing takes seconds: say what is happening from the start
        out(f"headflow simulate: timing a step at n = {n_small} and {n_big} to estimate the run at n = {n} ...",
            flush=True)
    times = {}
    for m in sorted({n_small, n_big}):
        x = particles.sample_uniform(m, model.d, rng=0)
        step = _timed(lambda x=x: particles.simulate(x, model, t1=dt, dt=dt, method=run["method"],
                                                     kappa=run["kappa"], rng=0, on_failure="return"))
        save = _timed(lambda x=x: particles.diagnose(model, x, include=run["diagnostics"]))
        times[m] = (step, save)
    step = _fit(n_small, times[n_small][0], n_big, times[n_big][0], p, n)
    save = _fit(n_small, times[n_small][1], n_big, times[n_big][1], p, n)
    steps = max(math.ceil(t1 / dt - 1e-9), 1)
    n_saves = int(run["n_saves"])
    return {"step": step, "save": save, "steps": steps, "n_saves": n_saves, "total": steps * step + n_saves * save,
            "growth": why, "power": p, "measured_at": sorted(times), "scaled": n > n_big,
            "finite": bool(np.isfinite(step) and np.isfinite(save))}


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.2g} s"


def _describe(est: dict) -> str:
    where = " and ".join(map(str, est["measured_at"]))
    scaled = f", scaled to n as {est['growth']}" if est["scaled"] else ""
    return (f"about {_duration(est['total'])}: {est['steps']} steps of about {_duration(est['step'])} and "
            f"{est['n_saves']} saves of about {_duration(est['save'])} (timed on this machine at n = {where}{scaled})")


def check_simulate_time(cfg: dict, model, *, out=print) -> dict:
    """Estimate a simulate run (:func:`estimate_simulate`); refuse it beyond ``[run] max_hours``
    (:class:`ConfigError` naming the key that makes it long), print the estimate when it is long."""
    run, default = cfg["run"], SCHEMAS["simulate"]["run"]
    est = estimate_simulate(cfg, model, out)
    limit = float(run["max_hours"]) * 3600.0
    if est["total"] > limit:
        steps_default = default["t1"] / default["dt"]
        grown = {"[run] n": (int(run["n"]) / default["n"]) ** est["power"],
                 "[run] dt (or t1)": est["steps"] / steps_default}
        key = max(grown, key=grown.get)
        if est["n_saves"] * est["save"] > est["steps"] * est["step"]:
            key = "[run] n_saves"
        # (the steps are t1 / dt: a longer dt or an earlier t1 shortens the run)
        fix = {"[run] dt (or t1)": "Raise [run] dt or lower [run] t1 (fewer steps)"}.get(key, f"Lower {key}")
        raise ConfigError(f"{key} makes this run too long: it would take {_describe(est)}, beyond [run] max_hours = "
                          f"{run['max_hours']:g}. {fix}, or raise [run] max_hours to run it anyway. "
                          "Nothing was run.")
    if est["step"] > NOTE_SECONDS or est["total"] > NOTE_TOTAL_SECONDS:
        out(f"headflow simulate: this run will take {_describe(est)}. The progress bar (unless --no-progress) moves "
            "once per step; Ctrl-C stops the run (nothing is written).", flush=True)
    return est
