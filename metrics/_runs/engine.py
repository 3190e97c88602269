"""The cell engine of sweeps and studies: cells named by their keys, loaded from a store when finished and
verified, the others run on an engine, with one progress bar.

:func:`metrics.run_sweep` and the studies over a grid (:meth:`metrics.extend.Study.run`) both hand it their
cells, their keys and a job per cell; what a cell is (its parameters, its typed settings) stays theirs, so
a study's settings reach its cells as they are, never as a dict.
"""

from __future__ import annotations

import pathlib

from .executors import run_jobs
from .progress import progress_bar
from .store import load_finished, stamp_cell

__all__ = ["cell_path", "run_cells", "run_typed_cell"]


def cell_path(store, key: str) -> str | None:
    """The file of the cell with ``key`` in ``store`` (None without a store): ``cell_<16 hex digits>.nc``."""
    return None if store is None else str(pathlib.Path(store) / f"cell_{key[:16]}.nc")


def run_cells(caller: str, cells: list, keys: list, job, *, store, engine, progress, label: str, shared=None,
              max_workers=None, max_pool_restarts: int = 2, legacy=None, current=None) -> dict:
    """The finished cells ``{index: Dataset}`` of ``cells`` (tuples ``(values, seed index, params)``, named by
    ``keys``): those in ``store`` that pass verification (:func:`metrics._runs.store.load_finished`, with
    ``legacy`` names and the ``current`` check), then the rest, each ``job(index, path, key) -> (fn, *args)``
    run on ``engine`` ("serial", "process" or a dask client; ``shared``: an argument every job has, sent to
    each worker once), with a progress bar labelled ``label``."""
    paths = [cell_path(store, key) for key in keys]
    results = {} if store is None else load_finished(store, caller, cells, keys, paths, legacy, current=current)
    todo = [idx for idx in range(len(cells)) if idx not in results]
    bar = progress_bar(progress, total=len(cells), done=len(results), desc=label)

    def done(idx, ds):
        results[idx] = ds
        if bar is not None:
            bar.update(1)

    run_jobs(engine, todo, lambda idx: job(idx, paths[idx], keys[idx]), done,
             describe=lambda idx: f"{cells[idx][2]} (seed {cells[idx][1]})", resumable=store is not None,
             shared=shared, max_workers=max_workers, max_pool_restarts=max_pool_restarts)
    if bar is not None:
        bar.close()
    return results


def run_typed_cell(cell, params: dict, seed_index: int, settings, entropy, path, key: str):
    """One cell of a study: ``cell(params, seed_index, settings, entropy)`` on the study's typed settings, given
    a ``status`` of 1 when it has none, stamped with its key and checksum and written to ``path`` (when given)."""
    ds = cell(dict(params), seed_index, settings, entropy)
    if "status" not in ds:
        ds["status"] = ((), 1)
    return stamp_cell(ds, key, path)
