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
           "check_simulate_time", "check_study_time", "check_sweep_time", "time_steps"]

#: the largest number of tokens timed on a fast route (at an eighth of it and at it; 1/16 of it on the exact pass)
CALIBRATION_N = 32768
#: above this estimated time per step (seconds) the estimate is printed before the run
NOTE_SECONDS = 2.0
#: a step timed shorter than this (seconds) is timed again as the difference of 5 steps and 1 (the call's cost out)
SHORT_STEP = 0.05
#: above this estimated total (seconds) the estimate is printed before the run
NOTE_TOTAL_SECONDS = 60.0


def summation_growth(model) -> tuple[int, str]:
    """(p, why): a step of ``model`` costs about a + b n^p, p = 1 on the fast routes, 2 on the exact pass."""
    from particles.summation import fast_available, fast_route

    if not model.attention.has_fast:
        return 2, f"the {model.attention.name} kind's pass over all pairs, O(n^2)"
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
    if n == n_big or n_big == n_small:
        return t_big
    b = max(t_big - t_small, 0.0) / (n_big**p - n_small**p)
    a = max(t_big - b * n_big**p, 0.0)
    return a + b * float(n) ** p


def time_steps(model, n: int, method: str, kappa: float, dt: float, save, out=print, command: str = "simulate"
               ) -> dict:
    """One step of ``model`` (``method``, ``kappa``) and one ``save(x)``, timed at two small numbers of tokens
    (module docstring): ``at(m)`` is (seconds per step, per save) at m tokens, for any m up to ``n`` and beyond."""
    import particles

    p, why = summation_growth(model)
    n_big = min(n, CALIBRATION_N if p == 1 else CALIBRATION_N // 16)
    n_small = max(n_big // 8, 2)
    if n > n_big:  # the timing takes seconds: say what is happening from the start
        out(f"headflow {command}: timing a step at n = {n_small} and {n_big} to estimate the run at n = {n} ...",
            flush=True)
    times = {}
    for m in sorted({n_small, n_big}):
        x = particles.sample_uniform(m, d=model.d, rng=0)
        def run(k, x=x):
            particles.simulate(x, model, t1=k * dt, dt=dt, method=method, kappa=kappa, rng=0, on_failure="return",
                               progress=False)

        step = _timed(lambda run=run: run(1))
        if step < SHORT_STEP:  # a call's own cost (its checks, a first call's warm-up) would outweigh a short step:
            step = _timed(lambda run=run: run(1))  # time it again, warm, and 4 steps more
            step = max(_timed(lambda run=run: run(5)) - step, 0.0) / 4 or step
        times[m] = (step, _timed(lambda x=x: save(x)))

    def at(m: int) -> tuple[float, float]:
        return tuple(_fit(n_small, times[n_small][i], n_big, times[n_big][i], p, m) for i in (0, 1))

    return {"at": at, "power": p, "growth": why, "measured_at": sorted(times), "scaled": n > n_big}


def estimate_simulate(cfg: dict, model, out=print) -> dict:
    """Seconds per step, per save and in all of a simulate config (module docstring), with what they rest on."""
    import numpy as np

    import particles

    run = cfg["run"]
    n, t1, dt = int(run["n"]), float(run["t1"]), float(run["dt"])
    timed = time_steps(model, n, run["method"], run["kappa"], dt,
                       lambda x: run["diagnostics"] == [] or particles.diagnose(model, x, include=run["diagnostics"]),
                       out)
    step, save = timed["at"](n)
    steps = max(math.ceil(t1 / dt - 1e-9), 1)
    n_saves = int(run["n_saves"])
    return {"step": step, "save": save, "steps": steps, "n_saves": n_saves, "total": steps * step + n_saves * save,
            "growth": timed["growth"], "power": timed["power"], "measured_at": timed["measured_at"],
            "scaled": timed["scaled"], "finite": bool(np.isfinite(step) and np.isfinite(save))}


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
        saves = est["n_saves"] * est["save"] > est["steps"] * est["step"]
        _refuse_long(grown, "run", "run", _describe(est), run["max_hours"], "[run] n_saves" if saves else None)
    if est["step"] > NOTE_SECONDS or est["total"] > NOTE_TOTAL_SECONDS:
        out(f"headflow simulate: this run will take {_describe(est)}. The progress bar (unless --no-progress) moves "
            "once per step; Ctrl-C stops the run (nothing is written).", flush=True)
    return est


def _refuse_long(grown: dict, section: str, what: str, told: str, max_hours: float, key: str | None = None):
    """Raise the :class:`ConfigError` of a ``what`` (run, sweep, study) estimated at ``told``, beyond ``[section]
    max_hours``, naming ``key`` (default: the key of ``grown``, key -> growth over its default, that grew most)."""
    key = key or max(grown, key=grown.get)
    # (the steps are t1 / dt: a longer dt or an earlier t1 shortens the run)
    fix = f"Raise [{section}] dt or lower [{section}] t1 (fewer steps)" if key.endswith("(or t1)") else f"Lower {key}"
    raise ConfigError(f"{key} makes this {what} too long: it would take {told}, beyond [{section}] max_hours = "
                      f"{max_hours:g}. {fix}, or raise [{section}] max_hours to run it anyway. Nothing was run.")


def _check_runs_time(cfg: dict, command: str, runs: dict, timed: dict, what: str, out) -> float:
    """Refuse ``runs`` (n -> how many runs of n tokens) of a sweep or a study beyond its ``max_hours``, naming the
    key that makes them long (as :func:`check_simulate_time`); print the estimate when it is long."""
    section = command  # ([sweep] and [study] hold the runs' settings)
    sec, default = cfg[section], SCHEMAS[command][section]
    steps = max(math.ceil(float(sec["t1"]) / float(sec["dt"]) - 1e-9), 1)
    n_saves, n_max, n_runs = int(sec["n_saves"]), max(runs), sum(runs.values())
    total = sum(count * (steps * timed["at"](n)[0] + n_saves * timed["at"](n)[1]) for n, count in runs.items())
    where = " and ".join(map(str, timed["measured_at"]))
    told = (f"about {_duration(total)}: {n_runs} runs ({what}) of {steps} steps and {n_saves} saves, a step of "
            f"about {_duration(timed['at'](n_max)[0])} at n = {n_max}, the largest size it runs (timed on this "
            f"machine at n = {where})")
    if total > float(sec["max_hours"]) * 3600.0:
        n_key, n_default = ("[sweep] grid.n_particles", 32) if command == "sweep" else \
            ("[study] n_values", max(default["n_values"]))
        grown = {f"[{section}] dt (or t1)": steps / (default["t1"] / default["dt"]),
                 n_key: (n_max / n_default) ** timed["power"],
                 "[sweep] grid or n_seeds" if command == "sweep" else "[study] n_seeds": n_runs / 8}
        _refuse_long(grown, section, command, told, sec["max_hours"])
    if total > NOTE_TOTAL_SECONDS:
        out(f"headflow {command}: this {command} will take {told}. Ctrl-C stops it; the finished cells are kept.",
            flush=True)
    return total


def check_study_time(cfg: dict, model, *, out=print) -> float:
    """:func:`check_simulate_time` for a study: its cells (``[study] n_values`` x ``n_seeds``) and its reference,
    counted as runs of ``m_grid`` points on S^1, or two runs of ``n_reference`` particles on S^{d-1}."""
    import numpy as np

    import particles

    st = cfg["study"]
    counts = st["n_seeds"] if isinstance(st["n_seeds"], list) else [st["n_seeds"]] * len(st["n_values"])
    runs = dict(zip(map(int, st["n_values"]), map(int, counts)))
    n_ref = int(st["m_grid"]) if model.d == 2 else int(st["n_reference"] or 16 * max(runs))
    runs[n_ref] = runs.get(n_ref, 0) + (1 if model.d == 2 else 2)
    kappa = float(st["kappa"])
    timed = time_steps(model, max(runs), "rk4" if np.isinf(kappa) else "euler_maruyama", kappa, float(st["dt"]),
                       lambda x: particles.diagnose(model, x, include=["energy", "entropy"]), out, "study")
    return _check_runs_time(cfg, "study", runs, timed, "the cells of n_values x n_seeds and the reference", out)


#: a sweep cell's parameters that neither the grid nor [model] sets (metrics.run_sweep's defaults)
SWEEP_CELL = {"n_particles": 32, "beta": 1.0, "n_heads": 1, "kind": "softmax", "d": 3}


def _costliest_cell(model_fn, fixed: dict, grid: dict):
    """The model of the sweep's costliest cell: the largest n_particles, d, n_heads, beta and head list, and
    the kind whose summation grows fastest with n."""
    import numpy as np

    largest = {k: max(v, key=len if k == "lambdas" else float) for k, v in grid.items() if k != "kind"}
    cell = {**SWEEP_CELL, **fixed, **largest}
    if "lambdas" in cell:  # (the number of heads is the number of head strengths)
        cell["n_heads"] = len(cell["lambdas"])
    models = [model_fn({**cell, "kind": kind}, np.random.default_rng(0)) for kind in grid.get("kind", [cell["kind"]])]
    return max(models, key=lambda m: summation_growth(m)[0])


def check_sweep_time(cfg: dict, *, out=print) -> float:
    """:func:`check_simulate_time` for a sweep: every cell (grid points x ``[sweep] n_seeds``), timed on the model
    of its costliest cell and scaled to each cell's n_particles."""
    import metrics
    import particles

    from ._models import build_sweep_model

    sw = cfg["sweep"]
    grid = dict(sw["grid"])
    model_fn, fixed = build_sweep_model(cfg["model"], grid)
    model = _costliest_cell(model_fn, fixed, grid)
    sizes = [int(n) for n in grid.pop("n_particles", [fixed.get("n_particles", SWEEP_CELL["n_particles"])])]
    per_n = int(sw["n_seeds"]) * math.prod(len(v) for v in grid.values())
    runs = {n: per_n * sizes.count(n) for n in set(sizes)}

    def save(x):
        for name in sw["metrics"]:
            metrics.METRICS[name].fn(x, None, model)
        particles.diagnose(model, x, include=["kinetic", "rate_residual"])

    timed = time_steps(model, max(runs), sw["method"], float(sw["kappa"]), float(sw["dt"]), save, out, "sweep")
    return _check_runs_time(cfg, "sweep", runs, timed, "the grid points x n_seeds", out)
