"""Where the cells of a sweep run: in this process, in a local process pool, or on dask.

Process-pool workers start by *spawn* (a forked child can inherit HDF5/netCDF locks), watch
their parent and exit within a second of its death (no orphans writing cells); a pool broken
by a dead worker is restarted for the unfinished cells. A script without a main guard and an
unpicklable cell function get their own messages. Dask follows its nanny semantics. A worker
keeps the memory its cells free (:func:`keep_freed_memory`): a cell allocates and frees the same
state-sized arrays at every step.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import sys
import threading
import time

from particles import SolverError
from particles.validation import InvalidParameterError

__all__ = ["FixedModel", "run_jobs", "run_serial", "run_pool", "run_dask", "check_not_bootstrapping", "check_picklable",
           "keep_freed_memory"]

#: glibc's mallopt parameters (malloc.h) and the environment variables that set them by hand
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


class FixedModel:
    """``model_fn`` for :func:`metrics.run_sweep`: one fixed model for every cell (picklable; ``name`` is what
    the provenance and the cell keys record)."""

    def __init__(self, model, name: str):
        self.model = model
        self.__qualname__ = name

    def __call__(self, params, rng):
        return self.model



def run_jobs(engine, todo, job, done, *, describe, resumable: bool, shared, max_workers, max_pool_restarts) -> None:
    """Run the jobs ``job(idx) -> (fn, *args)`` of ``todo`` on ``engine`` ("serial", "process" or a dask
    client), calling ``done(idx, result)`` as each finishes (``shared``: the argument every job has,
    sent to each worker once)."""
    if engine == "serial":
        run_serial(todo, job, done)
    elif engine == "process":
        run_pool(todo, job, done, max_workers, max_pool_restarts, shared=shared)
    else:
        run_dask(engine, todo, job, done, describe, resumable, shared=shared)


def run_serial(todo, job, done) -> None:
    """Run the jobs one after the other in this process."""
    for idx in todo:
        fn, *args = job(idx)
        done(idx, fn(*args))


def run_dask(client, todo, job, done, describe, resumable: bool, shared=None) -> None:
    """Run the jobs on a dask.distributed client, default or not (``shared``, an argument common to every
    job, is sent once, as the result of a task the cells depend on); a cell that kills its workers more
    often than the scheduler allows ends the run with a :class:`particles.SolverError` naming it."""
    from distributed import KilledWorker
    from distributed import as_completed as dask_completed

    with client.as_current():  # the shared future resolves on this client even when it is not the default
        # a task, not client.scatter: the scheduler can recompute it when the worker holding it dies
        fut_shared = client.submit(_identity, shared, pure=False) if shared is not None and todo else None
        futs = [client.submit(*(fut_shared if fut_shared is not None and a is shared else a for a in job(idx)),
                              pure=False) for idx in todo]
        where = {f.key: idx for f, idx in zip(futs, todo)}
        for fut in dask_completed(futs):
            try:
                ds = fut.result()
            except KilledWorker as exc:
                # the scheduler retried the cell on fresh workers (allowed-failures) and gave up
                raise SolverError(
                    f"dask workers died running the cell {describe(where[fut.key])} more often than the scheduler's "
                    f"distributed.scheduler.allowed-failures allows ({exc}); e.g. out of memory or killed. "
                    + ("Cells finished so far are in the store: rerun with the same store to resume."
                       if resumable else "Pass store=<folder> to keep finished cells across failures.")
                ) from None
            done(where[fut.key], ds)


class _Shared:
    """Stands in a job's arguments for the object :func:`run_pool` sent to each worker once."""


#: the object a process-pool worker received once (``shared`` of :func:`run_pool`)
_SHARED: dict = {}


def _identity(value):
    return value


def _call_shared(fn, *args):
    """Run ``fn`` on the job's arguments with the worker's shared object put back in place."""
    return fn(*(_SHARED["value"] if isinstance(a, _Shared) else a for a in args))


def keep_freed_memory() -> bool:
    """In a worker process of ours: let glibc's malloc keep the memory this process frees.

    By default glibc serves an array above a dynamic threshold (128 KiB to 32 MiB) by mmap and
    gives the top of its heap back to the kernel once 2x that threshold is free there, so a cell
    that allocates and frees state-sized arrays at every step (a 1 MiB stack of 2048 circle
    systems, its (S, n) temporaries) takes fresh pages, and a page fault each, at every step.
    Measured in fresh processes, one thread, with RK4's stage velocities already in reused
    buffers (the field protocol's ``writes_into``): 40k page faults and 3.8-3.9 s against 3.3k and
    3.55-3.65 s for 9 phase-diagram chunks of 2048 circle systems (385k faults and 4.3-4.4 s
    before those buffers); 90k -> 37k faults and 1.28 -> 1.19 s for three softmax cells at d = 8,
    144k -> 39k and 2.50 -> 2.22 s for three USA cells (each including the imports). This sets
    the mmap threshold to 32 MiB and the trim threshold to 512 MiB (mallopt(3)); the process keeps
    its peak heap until it exits, which a pool worker does at the end of the sweep.

    Returns whether it applied: not off Linux/glibc, and not when the environment sets malloc's
    thresholds itself (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``, ``GLIBC_TUNABLES``).
    Never called in the user's own process (the serial engine): a library does not retune the
    allocator of a process it does not own.
    """
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _MALLOC_ENV):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 512 << 20))


def _watch_parent(parent_pid: int, started=None, shared=None, interval: float = 0.2) -> None:
    """Process-pool initialiser: keep ``shared`` (sent once per worker, not with every job), and exit
    this worker as soon as its parent is gone (re-parented). ``started`` (an Event) is set once the
    worker got here, i.e. it finished importing the parent's main script: a pool whose workers never
    set it died while starting."""
    _SHARED["value"] = shared
    keep_freed_memory()
    # the pool's processes share the cores: one thread each for the compiled passes (particles.num_threads)
    from particles import set_num_threads

    set_num_threads(1)
    if started is not None:
        started.set()

    def watch():
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            time.sleep(interval)

    threading.Thread(target=watch, name="headflow-parent-watch", daemon=True).start()


def run_pool(todo, job, done, max_workers, max_restarts, shared=None) -> None:
    """Run the jobs on a spawn process pool whose workers exit when this process dies; a
    pool broken by a dead worker is restarted for the unfinished jobs. A job argument that *is*
    ``shared`` (e.g. the cell settings with a study's reference, hundreds of MB) is pickled once per
    worker, not once per job."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    remaining = list(todo)
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    for _ in range(max_restarts + 1):
        # spawn, not fork: a forked child can inherit HDF5/netCDF locks held by this process
        try:
            with ProcessPoolExecutor(max_workers=max_workers, mp_context=ctx,
                                     initializer=_watch_parent, initargs=(os.getpid(), started, shared)) as pool:
                token = _Shared()
                futs = {pool.submit(_call_shared, *(token if shared is not None and a is shared else a
                                                    for a in job(idx))): idx for idx in remaining}
                for fut in as_completed(futs):
                    try:
                        ds = fut.result()
                    except BrokenProcessPool:
                        continue  # a worker died: this cell is redone by the next pool
                    done(futs[fut], ds)
                    remaining.remove(futs[fut])
        except BrokenProcessPool:
            pass
        if not remaining:
            return
        if not started.is_set():
            # no worker ever got past importing the main script: restarting cannot help
            raise SolverError(
                "the process pool's workers died while starting, before running any cell (each one re-imports "
                f"{_main_script()}, and that failed; its error is printed above by the worker). The usual cause "
                "is a script that calls run_sweep or mean_field_limit_study without a main guard: "
                + _BOOTSTRAP_FIX.format(script="the script")
            )
    raise SolverError(
        f"the process pool broke {max_restarts + 1} times (a worker died, e.g. killed or out of memory); "
        f"{len(remaining)} cells are unfinished. Rerun with the same store to resume, or use fewer max_workers."
    )


def _main_script() -> str:
    # in a spawned worker importing it, the parent's script is __mp_main__
    for name in ("__mp_main__", "__main__"):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            return path
    return "the main script"


_BOOTSTRAP_FIX = (
    "put the call under `if __name__ == \"__main__\":` (worker processes are started by 'spawn' and "
    "re-import {script}, so a call at module level would run again in every worker), or use engine='serial'."
)


def check_not_bootstrapping(caller: str) -> None:
    """Refuse to start a process pool from a spawned worker that is still importing the main script.

    With the 'spawn' start method each worker re-imports the parent's main script as
    ``__mp_main__``; a script that calls :func:`run_sweep` at module level (no
    ``if __name__ == "__main__":`` guard) would start a new pool inside every worker.
    multiprocessing marks that phase with ``current_process()._inheriting``.
    """
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise InvalidParameterError(
            f"{caller}(engine='process') was called while a worker process was importing the main script: "
            + _BOOTSTRAP_FIX.format(script=_main_script())
        )


def check_picklable(job_args, caller: str, named: dict) -> None:
    """Process pools and dask send each cell's function and settings to the workers by pickle: a
    lambda or a nested function fails there with an obscure pickling error (or kills the pool)."""
    try:
        pickle.dumps(job_args)
    except Exception as exc:  # noqa: BLE001 - pickle raises PicklingError, AttributeError, TypeError...
        culprit = next((name for name, obj in named.items() if obj is not None and not _pickles(obj)), "settings")
        raise InvalidParameterError(
            f"The {culprit!r} parameter of {caller} must be picklable to run on worker processes "
            f"({type(exc).__name__}: {exc}). Define it with def at module level (not a lambda or a nested "
            "function), or use engine='serial'."
        ) from None


def _pickles(obj) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001
        return False
    return True


