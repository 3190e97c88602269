"""The memory a config implies, checked before anything is allocated.

A ``headflow simulate`` run holds, in float64 (8 bytes each): the particle states and the
integrator's stages (about :data:`STATE_COPIES` arrays of n x d), the heads (2 H d x d matrices:
M and W), and the saves (n_saves x n x d positions when ``[run] positions``, plus a few numbers
per head and per save). When the sum exceeds the memory this machine has available, the run is
refused (a :class:`~headflow._config.ConfigError` naming the key furthest above its default) instead of
ending in numpy's memory error after the work has begun.
"""

from __future__ import annotations

import os

from ._config import SCHEMAS, ConfigError

__all__ = ["available_memory", "check_simulate_memory", "STATE_COPIES"]

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


def check_simulate_memory(cfg: dict, available: int | None = None) -> int:
    """The bytes a simulate config needs (module docstring); raises :class:`ConfigError` naming the
    costliest of ``[run] n``, ``[run] n_saves`` and ``[model] d`` when it exceeds ``available``
    (default :func:`available_memory`)."""
    run = cfg["run"]
    n_heads, d = _heads_and_width(cfg["model"])
    n, n_saves = int(run["n"]), int(run["n_saves"])
    parts = {  # key -> (bytes, what they hold)
        "[run] n": (8.0 * STATE_COPIES * n * d, f"the particle states ({STATE_COPIES} arrays of n x d = {n} x {d})"),
        "[run] n_saves": (8.0 * n_saves * (n * d * bool(run["positions"]) + 16 * n_heads + 16),
                          f"the saves ({n_saves} x the positions n x d and the diagnostics)"),
        "[model] d": (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
    }
    total = sum(b for b, _ in parts.values())
    available = available_memory() if available is None else available
    if available is not None and total > available:
        # the key to lower: the one furthest above its default (the costliest part grows with it)
        grown = {"[run] n": n / SCHEMAS["simulate"]["run"]["n"], "[run] n_saves": n_saves /
                 SCHEMAS["simulate"]["run"]["n_saves"], "[model] d": d / SCHEMAS["simulate"]["model"]["d"]}
        key = max(grown, key=grown.get)
        detail = "; ".join(f"{k}: {_size(b)} for {what}" for k, (b, what) in parts.items())
        raise ConfigError(f"{key} is too large: the run needs about {_size(total)} of memory ({detail}), and this "
                          f"machine has {_size(available)} available. Lower {key} (or turn [run] positions off "
                          "to keep only the diagnostics). Nothing was allocated.")
    return int(total)
