"""The memory a config implies, checked before anything is allocated.

A ``headflow simulate`` run (and the largest cell of a sweep or a study) holds, in float64 (8
bytes each): the particle states and the integrator's stages (about :data:`STATE_COPIES` arrays
of n x d), the heads (2 H d x d matrices: M and W), and the saves (n_saves x n x d positions when
``[run] positions``, plus a few numbers per head and per save). When the sum exceeds the memory
this machine has available, the run is refused (a :class:`~headflow._config.ConfigError` naming
the key furthest above its default) instead of ending in numpy's memory error after the work has
begun.
"""

from __future__ import annotations

import os

from ._config import SCHEMAS, ConfigError

__all__ = ["available_memory", "check_simulate_memory", "check_study_memory", "check_sweep_memory", "STATE_COPIES"]

#: n x d arrays alive during a step: the state, RK4's four stages and its temporaries (upper bound)
STATE_COPIES = 12


def available_memory() -> int | None:
    """Bytes this machine can still allocate (``MemAvailable`` of /proc/meminfo, else the physical
    memory), or None when neither is known (then nothing is refused)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _size(n_bytes: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if n_bytes < 1000 or unit == "PB":
            return f"{n_bytes:.3g} {unit}"
        n_bytes /= 1000
    return ""


def _heads_and_width(model: dict) -> tuple[int, int]:
    """(H, d) of a [model] section: from M when given (one d x d matrix or a list of them), else
    from lambdas and d."""
    M = model.get("M")
    if M:
        stacked = isinstance(M[0], list) and bool(M[0]) and isinstance(M[0][0], list)
        return (len(M) if stacked else 1), len(M[0]) if stacked else len(M)
    return max(len(model.get("lambdas") or [1]), 1), int(model["d"])


def _refuse_beyond(parts: dict, grown: dict, available: int | None) -> int:
    """Sum ``parts`` (key -> (bytes, what they hold)); past ``available`` bytes, refuse naming the key
    furthest above its default (``grown``: key -> value / default; the costliest part grows with it)."""
    total = sum(b for b, _ in parts.values())
    available = available_memory() if available is None else available
    if available is not None and total > available:
        key = max(grown, key=grown.get)
        detail = "; ".join(f"{k}: {_size(b)} for {what}" for k, (b, what) in parts.items())
        raise ConfigError(f"{key} is too large: the run needs about {_size(total)} of memory ({detail}), and this "
                          f"machine has {_size(available)} available. Lower {key}. Nothing was allocated.")
    return int(total)


def check_simulate_memory(cfg: dict, available: int | None = None) -> int:
    """The bytes a simulate config needs (module docstring); raises :class:`ConfigError` naming the
    key to lower (of ``[run] n``, ``[run] n_saves`` and ``[model] d``) when it exceeds ``available``
    (default :func:`available_memory`)."""
    run, default = cfg["run"], SCHEMAS["simulate"]
    n_heads, d = _heads_and_width(cfg["model"])
    n, n_saves = int(run["n"]), int(run["n_saves"])
    parts = {  # key -> (bytes, what they hold)
        "[run] n": (8.0 * STATE_COPIES * n * d, f"the particle states ({STATE_COPIES} arrays of n x d = {n} x {d})"),
        "[run] n_saves": (8.0 * n_saves * (n * d * bool(run["positions"]) + 16 * n_heads + 16),
                          f"the saves ({n_saves} x the positions n x d and the diagnostics)"),
        "[model] d": (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
    }
    grown = {"[run] n": n / default["run"]["n"], "[run] n_saves": n_saves / default["run"]["n_saves"],
             "[model] d": d / default["model"]["d"]}
    return _refuse_beyond(parts, grown, available)


def check_study_memory(cfg: dict, available: int | None = None) -> int:
    """:func:`check_simulate_memory` for a study's largest cell (``[study] n_values``, ``[study]
    n_saves``, ``[model] d``): its states, its saved positions (the distances to the reference are
    measured on them) and its heads."""
    st, default = cfg["study"], SCHEMAS["study"]
    n_heads, d = _heads_and_width(cfg["model"])
    n, n_saves = max(int(v) for v in st["n_values"]), int(st["n_saves"])
    parts = {
        "[study] n_values": (8.0 * STATE_COPIES * n * d, f"the particle states of the largest n = {n} in d = {d}"),
        "[study] n_saves": (8.0 * n_saves * (n * d + 16), f"the saves ({n_saves} x the positions n x d)"),
        "[model] d": (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
    }
    grown = {"[study] n_values": n / max(default["study"]["n_values"]),
             "[study] n_saves": n_saves / default["study"]["n_saves"], "[model] d": d / default["model"]["d"]}
    return _refuse_beyond(parts, grown, available)


def check_sweep_memory(cfg: dict, available: int | None = None) -> int:
    """:func:`check_simulate_memory` for a sweep's largest cell (``[sweep] grid.n_particles``,
    ``[sweep] n_saves``, ``[model] d`` or ``[sweep] grid.d``); the sweep's defaults where neither
    sets a value (32 tokens, d = 3, one head)."""
    sw, model = cfg["sweep"], cfg["model"]
    grid = sw["grid"] if isinstance(sw["grid"], dict) else {}
    n = max((int(v) for v in grid.get("n_particles", [32])), default=32)
    d_key = "[sweep] grid.d" if "d" in grid else "[model] d"
    d = max((int(v) for v in grid["d"]), default=3) if "d" in grid else int(model["d"] or 3)
    n_heads = max(len(model["lambdas"] or [1]), max((int(v) for v in grid.get("n_heads", [1])), default=1))
    if model.get("M"):
        n_heads, d = _heads_and_width(model)
    n_saves = int(sw["n_saves"])
    parts = {
        "[sweep] grid.n_particles": (8.0 * STATE_COPIES * n * d, f"the particle states of the largest n = {n}"),
        "[sweep] n_saves": (8.0 * n_saves * (2 * n + 16 * len(sw["metrics"]) + 16),
                            f"the saves ({n_saves} x the metrics and cluster labels)"),
        d_key: (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
    }
    grown = {"[sweep] grid.n_particles": n / 32, "[sweep] n_saves": n_saves / SCHEMAS["sweep"]["sweep"]["n_saves"],
             d_key: d / 3}
    return _refuse_beyond(parts, grown, available)
