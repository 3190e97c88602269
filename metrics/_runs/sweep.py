r"""Parameter sweeps over (n_particles, beta, n_heads, kind, seed) with resumable storage.

:func:`run_sweep` runs one particle simulation per cell of the grid × seeds, records the
named metrics of :data:`metrics.METRICS` (plus the Theorem 11 rate) at the save times, and
returns one ``xr.Dataset`` whose dims are the swept parameters, ``seed`` and ``time``.

Contract:

1. **Reproducible.** Cell randomness comes from ``SeedSequence(entropy, spawn_key=(k,))``
   for seed index k (the same as ``SeedSequence(entropy).spawn(n_seeds)[k]``): the same
   seed index gives the same draw whatever the other parameters; ``entropy`` is stored in
   the attrs.
2. **Incremental and resumable.** With ``store=DIR`` each finished cell is written to its
   own netCDF file (to ``<name>.part<pid>``, flushed, then renamed, so a killed run never leaves
   a file that looks complete); a rerun loads the finished cells and computes only the rest. The
   parts of dead writers that the store's index records are removed (no other file is).
3. **Verified.** A cell file carries the hash of its parameters (``cell_key``) and the SHA-256 of
   its values (``content_sha256``), every variable HDF5's Fletcher-32 checksum, and the store's
   index the digest of its attrs and values. Resume checks them, the ``headflow_version`` that
   wrote it and that its ``model`` is what ``model_fn`` builds today; a file that fails is
   recomputed, with a :class:`CellWarning` naming it (a damaged one kept as ``.unreadable``). The
   folder is checked before any work (not a file, creatable, writable); other files are left alone.
4. **Failures are data.** A cell whose simulation fails (:class:`particles.SolverError`,
   e.g. an overflowing USA head) is recorded with ``success = 0``, NaN rows after the last
   finite save and its message in ``failure_message``; it does not abort the sweep.
5. **Engines.** ``"serial"`` (default), ``"process"`` (a local process pool), or a
   ``dask.distributed.Client`` for sweeps that outgrow one machine; each worker writes its
   own cell, so a dead worker loses only its cell (:mod:`metrics._runs.executors`; the store is
   :mod:`metrics._runs.store`).
"""

from __future__ import annotations

import functools
import itertools
import json
import os

import numpy as np
import xarray as xr

from particles import STEPPERS, MultiHead, SaveAt, SolverError, diagnose, sample_uniform, simulate
from particles.validation import (
    NONE,
    AnyOf,
    Function,
    Instance,
    Integer,
    Options,
    Relation,
    SequenceOf,
    declare,
)

from .._data.provenance import model_attrs, provenance
from .._observables.registry import METRICS
from . import models as M
from . import params as P
from .assemble import assemble as _assemble
from .cells import columns_dataset, summation_cell_attrs
from .engine import cell_path, run_cells
from .executors import check_not_bootstrapping, check_picklable
from .failures import FailedCellWarning, failed_cells, warn_failed
from .models import SweepModel, check_cell_model, check_metrics_fit, describe_model_fn, random_heads, scalar_heads
from .store import CellWarning, _cell_key, stamp_cell

__all__ = ["run_sweep", "default_model", "SWEEP_PARAMS", "CellWarning", "FailedCellWarning"]



#: parameters a grid may sweep, with their long names
SWEEP_PARAMS = {
    "n_particles": "number of tokens",
    "beta": "inverse temperature",
    "n_heads": "number of heads",
    "kind": "attention kind",
    "d": "ambient dimension",
    "lambdas": "head strengths lambda_h (scalar heads M_h = W_h = lambda_h I): the number for one head, JSON "
               "text for several (numbers in lambda_h)",
}
_DEFAULTS = {"n_particles": 32, "beta": 1.0, "n_heads": 1, "kind": "softmax", "d": 3}


_MODEL_PARAMS = ("n_heads", "d", "beta", "kind")


def _heads_and_d_ok(p) -> bool:
    return Integer(1).accepts(p["n_heads"]) and Integer(2).accepts(p["d"])


@declare(params=Instance(dict, test=lambda p: set(_MODEL_PARAMS) <= set(p), what="a dict of sweep parameters with "
                         f"keys {list(_MODEL_PARAMS)}", bad=({"d": 3}, [("d", 3)], None)),
         rng=Instance(np.random.Generator, hint="Use np.random.default_rng(seed)."),
         relations=[Relation(("params",), lambda p: _heads_and_d_ok(p), "must hold n_heads >= 1 and d >= 2 (integers)",
                             breaks={"params": {"n_heads": 0, "d": 3, "beta": 1.0, "kind": "usa"}})])
def default_model(params: dict, rng: np.random.Generator) -> MultiHead:
    r"""Heads :math:`M_h = W_h = Q_h\,\mathrm{diag}(u_h)\,Q_h^\top/H` with random rotations
    :math:`Q_h` and :math:`u_h \sim U(0.5, 1.5)^d` (symmetric, value-aligned, positive definite);
    scalar heads :math:`M_h = W_h = \lambda_h I` when ``params`` has head strengths ``lambdas``."""
    H, d = int(params["n_heads"]), int(params["d"])
    M = scalar_heads(params["lambdas"], d) if "lambdas" in params else random_heads(H, d, rng)
    return MultiHead(M, M.copy(), beta=float(params["beta"]), kind=str(params["kind"]))


def _run_cell(params: dict, seed_index: int, settings: dict, path: str | None, key: str = "") -> xr.Dataset:
    """Simulate one cell and return its Dataset (dims: time); write it to ``path`` if given
    (with its ``cell_key`` and ``content_sha256`` attrs)."""
    rng_init, rng_model, rng_noise = M.cell_streams(settings, seed_index)
    model = check_cell_model(settings["model_fn"](params, rng_model), params)
    x0 = sample_uniform(int(params["n_particles"]), d=int(params["d"]), rng=rng_init)
    names = settings["metrics"]

    def save_fn(t, x):
        row = {name: METRICS[name].fn(x, None, model) for name in names}
        diag = diagnose(model, x, include=["kinetic", "rate_residual"])
        row.update(diag)
        return row

    try:
        traj = simulate(x0, model, t1=settings["t1"], dt=settings["dt"], method=settings["method"],
                        save=SaveAt(ts=settings["ts"], x=False, fn=save_fn),
                        kappa=settings["kappa"], rng=rng_noise, on_failure="return", progress=False)
        saved, success, message, sums = traj.saved, traj.success, traj.message, traj.summation
    except SolverError as exc:  # failed before the first save (e.g. the metrics at t0 overflow)
        saved, success, message, sums = {}, False, str(exc), {}
    ds = columns_dataset(saved, settings["ts"], success, message, names=list(names) + ["kinetic", "rate_residual"])
    ds.attrs.update(summation_cell_attrs(sums))  # the route of each head and the largest bound (the sweep's attrs)
    # the model that ran: the assembled sweep records it per cell, and what its time coordinate means
    ds.attrs.update({"model": json.dumps(model_attrs(model)), "log_time_scale": float(model.log_time_scale)})
    return stamp_cell(ds, key, path)


def _custom_cell(cell_fn, params: dict, seed_index: int, settings: dict, path, key: str = "") -> xr.Dataset:
    """A caller's cell (``run_sweep(cell_fn=...)``) under the same contract as :func:`_run_cell`:
    computed in memory, stamped with its ``cell_key`` and ``content_sha256``, written atomically."""
    ds = cell_fn(params, seed_index, settings)
    if "status" not in ds:
        ds["status"] = ((), 1)
    return stamp_cell(ds, key, path)


@declare(
    grid=P.GRID, n_seeds=Integer(1), seed=AnyOf(NONE, P.SEED), t1=P.T1, dt=P.DT, n_saves=P.N_SAVES,
    method=Options(*STEPPERS), kappa=P.KAPPA, model_fn=Function("a callable model_fn(params, rng) -> MultiHead"),
    max_pool_restarts=Integer(0), cell_fn=AnyOf(NONE, Function()),
    cell_settings=AnyOf(NONE, Instance(dict)), fixed=AnyOf(NONE, P.FIXED), **P.RUN_OPTIONS,
    metrics=SequenceOf(Options(*METRICS), min_len=0, hint="Name them in a list: metrics=['n_clusters']."),
    relations=[P.DT_LE_T1, P.STEPS_WITHIN_METHOD, P.HEADS_ONCE, P.FIXED_OR_SWEPT])
def run_sweep(
    grid: dict,
    *,
    n_seeds: int = 1,
    seed: int | None = 0,
    t1: float = 10.0,
    dt: float = 0.05,
    n_saves: int = 11,
    method: str = "rk4",
    kappa: float = np.inf,
    metrics=("n_clusters", "energy_multi", "mean_entropy"),
    model_fn=default_model,
    engine="serial",
    max_workers: int | None = None,
    store: str | os.PathLike | None = None,
    progress: bool | None = None,
    max_pool_restarts: int = 2,
    cell_fn=None,
    cell_settings: dict | None = None,
    fixed: dict | None = None,
) -> xr.Dataset:
    r"""Run the grid × seeds and return one labelled Dataset.

    Parameters
    ----------
    grid : dict of parameter name to list of values
        Swept parameters, any of :data:`SWEEP_PARAMS`; the others take their ``fixed`` values.
        ``lambdas`` sweeps head strengths: each value a list, e.g. ``[[1.0], [1.0, 0.5]]``, for
        scalar heads :math:`M_h = W_h = \lambda_h I` (``n_heads`` is then each list's length; its
        coordinate holds the lists as JSON text, ``ds.sel(lambdas="[1.0, 0.5]")``).
    n_seeds : int
        Independent initial conditions per cell (dim ``seed``).
    seed : int or None
        Root entropy (``None`` draws fresh entropy; it is recorded in the attrs).
    t1, dt, n_saves, method, kappa
        Simulation settings (``n_saves`` equally spaced save times in [0, t1]).
    metrics : sequence of str
        Names from :data:`metrics.METRICS`, evaluated at each save time.
    model_fn : callable ``(params, rng) -> MultiHead``
        Builds the model of a cell (top-level function when using processes or dask).
    engine : "serial", "process" or a dask.distributed.Client
    store : path, optional
        Folder for one netCDF file per finished cell; enables resuming.
    progress : bool or None
        tqdm progress bar over cells: ``None`` (default) shows it once the run has taken 2 s,
        ``True`` at once, ``False`` never; a rerun with every cell in the store shows none.
    max_pool_restarts : int
        With ``engine="process"``: how many times a pool broken by a dead worker is
        restarted for the unfinished cells before giving up with :class:`particles.SolverError`.

    cell_fn : callable ``(params, seed_index, settings) -> xr.Dataset``, optional
        Replaces the default cell (a particle run from uniform tokens): it computes one cell in memory
        and returns its columns with dim ``time`` (``status`` 0/1 and a ``failure_message`` attr when a
        run stops; :func:`metrics._runs.cells.columns_dataset` builds that); the sweep loads, verifies,
        stamps and writes the cells. The studies are built on it (:class:`metrics._studies.spec.Study`).
    fixed : dict, optional
        Values of the parameters the grid does not sweep (each one value, names as in ``grid``);
        the rest take the defaults n_particles=32, beta=1, n_heads=1, kind="softmax", d=3
        (recorded as ``fixed_<name>`` attrs).
    cell_settings : dict, optional
        Extra entries of ``settings`` for ``cell_fn``; its ``"key"`` entry (a string) enters the
        cell file names, so two studies with different settings never share cells.

    Returns
    -------
    xr.Dataset with dims (*grid keys, seed, time)
        A cell whose run stopped before t1 has ``success = 0``, NaN values after its last finite
        save and the solver's reason in ``failure_message``; the ``failed_cells`` attr lists them
        all (JSON: params, seed, message).

    Warns
    -----
    CellWarning
        When a stored cell fails verification and is recomputed.
    FailedCellWarning
        When cells did not reach t1; it names them and the solver's reason.
    """
    caller, axes = "run_sweep", grid
    settings, opts = _check_args(caller, seed, t1, dt, n_saves, method, kappa, metrics, model_fn, max_workers, progress,
                                 max_pool_restarts, engine)
    key_settings = _key_settings(settings, model_fn, cell_settings)
    settings.update(cell_settings or {})
    run_cell = _run_cell if cell_fn is None else functools.partial(_custom_cell, cell_fn)
    fixed = _merge_fixed(fixed, axes)
    cells = _grid_cells(axes, n_seeds, fixed)
    if cell_fn is None:  # the first cell's model, before any work (each cell checks its own)
        check_metrics_fit(check_cell_model(model_fn(cells[0][2], np.random.default_rng(0)), cells[0][2]), metrics)
    # a failed cell is named by what identifies it: with a cell_fn (a study's own model) the grid only,
    # not the default beta, kind and d its cells never used
    return _run(caller, axes, n_seeds, cells, fixed, settings, key_settings,
                lambda idx, path, key: (run_cell, cells[idx][2], cells[idx][1], settings, path, key), shared=settings,
                named={"model_fn": model_fn, "cell_fn": cell_fn, "cell_settings": cell_settings},
                legacy_key=(cell_settings or {}).get("legacy_key"), store=store, engine=engine, opts=opts,
                current=None if cell_fn else M.model_now(cells, settings, model_fn), seed=seed,
                names=SWEEP_PARAMS if cell_fn is None else tuple(axes))


def _grid_cells(axes: dict, n_seeds: int, fixed: dict) -> list:
    """(values, seed index, params) of every cell of the grid x seeds, the last axis fastest, seeds fastest."""
    return [(values, s, _cell_params(fixed, dict(zip(axes, values))))
            for values in itertools.product(*axes.values()) for s in range(n_seeds)]


def _run(caller, axes, n_seeds, cells, fixed, settings, key_settings, job, *, shared, named, legacy_key, store,
         engine, opts, current, seed, names) -> xr.Dataset:
    """The sweep's cells on the cell engine (keyed in format 1), assembled, with their failures and provenance."""
    keys = [_cell_key(params, s, key_settings) for _, s, params in cells]
    if engine == "process" and cells:  # (dask pickles with cloudpickle, which takes lambdas)
        check_picklable(job_args=job(0, None, keys[0]), caller=caller, named=named)
    results = run_cells(caller, cells, keys, job, store=store, engine=engine, progress=opts["progress"],
                        label=settings.get("progress_label", "sweep"), shared=shared,
                        max_workers=opts["max_workers"], max_pool_restarts=opts["max_pool_restarts"],
                        legacy=None if store is None else _legacy(cells, key_settings, legacy_key, store),
                        current=current)
    unswept = {k: v for k, v in fixed.items() if k not in axes}
    ds = _assemble(axes, n_seeds, cells, results, settings, SWEEP_PARAMS, unswept)
    return _record(ds, cells, results, settings, key_settings, settings["model_fn"],
                   config={"grid": axes, "n_seeds": n_seeds, "seed": seed, "defaults": unswept}, names=names)


def _record(ds, cells, results, settings, key_settings, model_fn, config, names=SWEEP_PARAMS) -> xr.Dataset:
    """The sweep's failed cells (named by ``names``) and their warning, the source of its heads and its
    provenance."""
    # the engine is left out: serial, process and dask runs of one config give identical datasets
    config = {**config, "n_saves": len(settings["ts"]), **key_settings}
    failed = failed_cells(cells, results, names)
    ds.attrs["failed_cells"] = json.dumps(failed, default=str)
    warn_failed(failed, len(cells), settings.get("caller", "run_sweep"))
    probe = model_fn(cells[0][2], np.random.default_rng(0))  # only its summation mode and tol are read
    ds.attrs["model_source"] = _model_source(model_fn, cells[0][2])
    ds.attrs.update(provenance(config=config, seeds={"entropy": str(settings["entropy"]),
                                                     "spawn_key": "(seed index,)"}, model=probe))
    return ds


def _key_settings(settings: dict, model_fn, cell_settings: dict | None) -> dict:
    """What enters every cell key besides its parameters and seed: the run's settings, the model
    function's name and a caller's ``cell_settings["key"]`` (a study's key fields)."""
    out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in settings.items() if k != "model_fn"}
    out["model_fn"] = describe_model_fn(model_fn)
    if cell_settings is not None:
        out["cell_key"] = str(cell_settings.get("key", ""))
    return out


def _legacy(cells, key_settings: dict, legacy: str | None, store):
    """(keys, paths) of the cells under a study's format-1 key when its format changed, else None."""
    if not legacy:
        return None
    keys = [_cell_key(params, s, {**key_settings, "cell_key": legacy}) for _, s, params in cells]
    return keys, [cell_path(store, key) for key in keys]


def _merge_fixed(fixed, axes) -> dict:
    """The values of the parameters ``axes`` does not sweep: ``fixed`` over the defaults; with head
    strengths, ``n_heads`` is their number (each cell's when they are swept)."""
    if fixed:
        fixed = {k: vals[0] for k, vals in P.GRID.convert({k: [v] for k, v in fixed.items()}).items()}
    out = {**_DEFAULTS, **(fixed or {})}
    if "lambdas" in out:
        out["n_heads"] = len(out["lambdas"])
    if "lambdas" in axes:
        out.pop("n_heads")
    return out


def _cell_params(fixed: dict, swept: dict) -> dict:
    """The parameters of one cell (what ``model_fn`` receives)."""
    params = {**fixed, **swept}
    if "lambdas" in swept:
        params["n_heads"] = len(swept["lambdas"])
    return params


def _model_source(model_fn, params: dict) -> str:
    """What built the cells' heads, in words (the ``model_source`` attr)."""
    if model_fn is default_model:
        heads = "scalar heads M_h = W_h = lambda_h I from lambdas" if "lambdas" in params else "random symmetric heads"
        return f"metrics.default_model ({heads})"
    if isinstance(model_fn, SweepModel):
        return f"metrics.SweepModel ({model_fn.source(params)}): {model_fn!r}"
    return describe_model_fn(model_fn)


def _check_args(caller, seed, t1, dt, n_saves, method, kappa, metrics, model_fn, max_workers, progress,
                max_pool_restarts, engine):
    """The cells' settings and the run options of :func:`run_sweep` (its scalars are declared)."""
    opts = {"max_workers": max_workers, "progress": progress, "max_pool_restarts": max_pool_restarts}
    if engine == "process":
        check_not_bootstrapping(caller)
    settings = {"entropy": np.random.SeedSequence(seed).entropy, "t1": float(t1), "dt": float(dt), "method": method,
                "kappa": float(kappa), "ts": np.linspace(0.0, t1, n_saves), "metrics": list(metrics),
                "model_fn": model_fn}
    return settings, opts
