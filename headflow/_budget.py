"""The memory a config implies, checked before anything is allocated.

A ``headflow simulate`` run (and the largest cell of a sweep or a study) holds, in float64 (8
bytes each): the particle states and the integrator's stages (about :data:`STATE_COPIES` arrays
of n x d), the heads (2 H d x d matrices: M and W), and the saves (n_saves x n x d positions when
``[run] positions``, plus a few numbers per head and per save). When the sum exceeds the memory
this machine has available, the run is refused (a :class:`~headflow._config.ConfigError` naming
the key furthest above its default) instead of ending in numpy's memory error after the work has
begun.

A sweep or a study also holds one record per cell (grid points x seeds, or n_values x seeds): its
task, its key and its results while they are assembled (about :data:`CELL_BYTES` plus its saved
numbers). Beyond :data:`MAX_CELLS` cells the config is refused before any cell is listed, naming
the key to lower (``[sweep] n_seeds``, ``[sweep] grid``, ``[study] n_seeds``, ``[study] n_values``).
A study's reference adds its grid (``[study] m_grid`` cells, with their saves), its directions
(``[study] n_projections``, each with the projected reference's quantiles at every save) and its
Lagrangian particles (``[study] n_reference``); these are counted with the rest.

The disk is checked too: a run whose saved numbers alone (each float64 once, a lower bound of the
files it writes: the output, and a sweep's or study's cells) exceed the free space of the file system
that will hold the output is refused before it starts (:func:`check_disk`).
"""

from __future__ import annotations

import os
import pathlib

from ._config import SCHEMAS, ConfigError

__all__ = ["available_memory", "check_simulate_memory", "check_study_memory", "check_sweep_memory", "check_cells",
           "STATE_COPIES", "MAX_CELLS", "CELL_BYTES", "free_space", "check_disk"]

#: n x d arrays alive during a step: the state, RK4's four stages and its temporaries (upper bound)
STATE_COPIES = 12
#: the most cells (grid points x seeds, or n_values x seeds) a sweep or a study runs; each is a file of the store
MAX_CELLS = 100_000
#: bytes of one cell's task, key and result record beside its saved numbers (Python objects; upper bound)
CELL_BYTES = 4096
#: quantile nodes per projected reference of a study in d >= 3 (mean_field_limit_study's n_quantiles)
N_QUANTILES = 16384


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


def free_space(path) -> int | None:
    """Bytes free for this user on the file system that will hold ``path`` (its nearest existing folder),
    or None when unknown (then nothing is refused)."""
    path = pathlib.Path(path).absolute()
    anchor = next((p for p in (path, *path.parents) if p.exists()), None)
    try:
        st = os.statvfs(anchor)
    except (OSError, AttributeError, TypeError):
        return None
    return st.f_bavail * st.f_frsize


def check_disk(out, n_bytes: float, what: str, free: int | None = None) -> None:
    """Refuse (:class:`ConfigError`) a run that writes at least ``n_bytes`` (``what``) where ``out`` goes when
    the file system there has less free (``free``, default :func:`free_space`); nothing when ``out`` is None."""
    free = free_space(out) if free is None and out is not None else free
    if free is not None and n_bytes > free:
        raise ConfigError(f"--out {str(out)!r}: the run writes at least {_size(n_bytes)} ({what}), and the file system "
                          f"there has {_size(free)} free. Free space, or choose an --out on another disk, or lower the "
                          "run's size. Nothing was run.")


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


def check_cells(counts: dict, what: str) -> int:
    """The number of cells, the product of ``counts`` (key -> its number of values); beyond
    :data:`MAX_CELLS` a :class:`ConfigError` names the key with the most values (before any cell is listed)."""
    cells = 1
    for c in counts.values():
        cells *= int(c)
    if cells > MAX_CELLS:
        key = max(counts, key=counts.get)
        factors = " x ".join(f"{c:,} ({k})" for k, c in counts.items())
        raise ConfigError(f"{key} is too large: the {what} would run {cells:,} cells ({factors}), beyond the "
                          f"{MAX_CELLS:,} cells headflow runs (each cell is a file of the store and a record held in "
                          f"memory until the result is assembled). Lower {key}, or split the {what} into several "
                          "configs. Nothing was run.")
    return cells


def check_simulate_memory(cfg: dict, available: int | None = None, out=None, free: int | None = None) -> int:
    """The bytes a simulate config needs (module docstring); raises :class:`ConfigError` naming the
    key to lower (of ``[run] n``, ``[run] n_saves`` and ``[model] d``) when it exceeds ``available``
    (default :func:`available_memory`), or when its saves exceed the disk space ``free`` where ``out`` goes."""
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
    total = _refuse_beyond(parts, grown, available)
    check_disk(out, parts["[run] n_saves"][0], "its saves", free)
    return total


def _reference_parts(st: dict, d: int, n: int) -> tuple[dict, dict]:
    """Parts and growth (as in :func:`_refuse_beyond`) of a study's mean-field reference: the S^1 grid and its
    saves with their quantile atoms (d = 2), or the bound grid, the directions with the projected reference's
    quantiles and the Lagrangian particles (d >= 3)."""
    default = SCHEMAS["study"]["study"]
    m, n_saves, n_ref = int(st["m_grid"]), int(st["n_saves"]), int(st["n_reference"] or 16 * n)
    if d == 2:
        grid = 8.0 * m * (STATE_COPIES + 5 * n_saves), f"the reference's {m} grid cells, with 4 quantile atoms each"
        return {"[study] m_grid": grid}, {"[study] m_grid": m / default["m_grid"]}
    n_proj = int(st["n_projections"])
    parts = {"[study] m_grid": (8.0 * 2 * m * (d + 2), f"the {m} points bounding the density"),
             "[study] n_projections": (8.0 * n_proj * (d + n_saves * min(N_QUANTILES, n_ref)),
                                       f"{n_proj} directions, each with the reference's quantiles at every save"),
             "[study] n_reference": (8.0 * n_ref * d * (STATE_COPIES + n_saves),
                                     f"the reference's {n_ref} particles and their saves")}
    grown = {"[study] m_grid": m / default["m_grid"], "[study] n_projections": n_proj / default["n_projections"],
             "[study] n_reference": n_ref / (16 * max(default["n_values"]))}
    return parts, grown


def check_study_memory(cfg: dict, available: int | None = None, out=None, free: int | None = None) -> int:
    """:func:`check_simulate_memory` for a study: its largest cell (``[study] n_values``, ``[study]
    n_saves``, ``[model] d``: its states, its saved positions, on which the distances to the reference
    are measured, and its heads), its cell records (``[study] n_seeds``; :func:`check_cells` first)
    and its reference (``[study] m_grid``, ``n_projections``, ``n_reference``)."""
    st, default = cfg["study"], SCHEMAS["study"]
    n_heads, d = _heads_and_width(cfg["model"])
    n, n_saves = max(int(v) for v in st["n_values"]), int(st["n_saves"])
    seeds = max(st["n_seeds"]) if isinstance(st["n_seeds"], list) else int(st["n_seeds"])  # (or one count per n)
    cells = check_cells({"[study] n_values": len(st["n_values"]), "[study] n_seeds": seeds}, "study")
    parts = {
        "[study] n_values": (8.0 * STATE_COPIES * n * d, f"the particle states of the largest n = {n} in d = {d}"),
        "[study] n_saves": (8.0 * n_saves * (n * d + 16), f"the saves ({n_saves} x the positions n x d)"),
        "[model] d": (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
        "[study] n_seeds": (cells * (CELL_BYTES + 8.0 * n_saves * 16), f"the records of the {cells} cells"),
    }
    grown = {"[study] n_values": n / max(default["study"]["n_values"]),
             "[study] n_saves": n_saves / default["study"]["n_saves"], "[model] d": d / default["model"]["d"],
             "[study] n_seeds": seeds / default["study"]["n_seeds"]}
    ref_parts, ref_grown = _reference_parts(st, d, n)
    total = _refuse_beyond({**parts, **ref_parts}, {**grown, **ref_grown}, available)
    check_disk(out, 2 * 8.0 * cells * n_saves * 4, f"4 numbers per save of each of {cells} cells, in the store "
               "and in the output", free)
    return total


def check_sweep_memory(cfg: dict, available: int | None = None, out=None, free: int | None = None) -> int:
    """:func:`check_simulate_memory` for a sweep's largest cell (``[sweep] grid.n_particles``,
    ``[sweep] n_saves``, ``[model] d`` or ``[sweep] grid.d``; the sweep's defaults where neither
    sets a value: 32 tokens, d = 3, one head) and its cell records (``[sweep] n_seeds``;
    :func:`check_cells` first)."""
    sw, model = cfg["sweep"], cfg["model"]
    grid = sw["grid"] if isinstance(sw["grid"], dict) else {}
    n = max((int(v) for v in grid.get("n_particles", [32])), default=32)
    d_key = "[sweep] grid.d" if "d" in grid else "[model] d"
    d = max((int(v) for v in grid["d"]), default=3) if "d" in grid else int(model["d"] or 3)
    n_heads = max(len(model["lambdas"] or [1]), max((int(v) for v in grid.get("n_heads", [1])), default=1))
    if model.get("M"):
        n_heads, d = _heads_and_width(model)
    n_saves = int(sw["n_saves"])
    points = 1
    for values in grid.values():
        points *= len(values) if isinstance(values, (list, tuple)) else 1
    cells = check_cells({"[sweep] grid": points, "[sweep] n_seeds": int(sw["n_seeds"])}, "sweep")
    parts = {
        "[sweep] grid.n_particles": (8.0 * STATE_COPIES * n * d, f"the particle states of the largest n = {n}"),
        "[sweep] n_saves": (8.0 * n_saves * (2 * n + 16 * len(sw["metrics"]) + 16),
                            f"the saves ({n_saves} x the metrics and cluster labels)"),
        d_key: (8.0 * 2 * n_heads * d * d, f"the heads ({2 * n_heads} matrices of d x d = {d} x {d})"),
        "[sweep] n_seeds": (cells * (CELL_BYTES + 8.0 * n_saves * (n + len(sw["metrics"]) + 4)),
                            f"the records and results of the {cells} cells (grid points x seeds)"),
    }
    default = SCHEMAS["sweep"]["sweep"]
    grown = {"[sweep] grid.n_particles": n / 32, "[sweep] n_saves": n_saves / default["n_saves"], d_key: d / 3,
             "[sweep] n_seeds": int(sw["n_seeds"]) / default["n_seeds"]}
    total = _refuse_beyond(parts, grown, available)
    per_cell = len(sw["metrics"]) + 2  # (with kinetic and rate_residual)
    check_disk(out, 2 * 8.0 * cells * n_saves * per_cell, f"{per_cell} numbers per save of each of {cells} cells, in "
               "the store and in the output", free)
    return total
