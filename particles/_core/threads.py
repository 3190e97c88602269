"""The one thread setting of the compiled passes.

:func:`num_threads` is the number of threads the fast summation (FINUFFT, ducc0), the exact pass
(its pool over row blocks, whose GEMMs and exps release the GIL) and the spherical-harmonic
transforms may use. It is the setting of :func:`set_num_threads` (or the environment variable
``HEADFLOW_NUM_THREADS``; default: the CPUs this process may run on), never more than the current
limit of the BLAS and OpenMP pools, so ``threadpoolctl.threadpool_limits(1)`` (or
``OMP_NUM_THREADS=1``) makes every pass single-threaded.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from .declarations import declare
from .params import NONE, AnyOf, Integer

__all__ = ["num_threads", "set_num_threads", "parallel_chunks", "pool_threads", "blas_single", "MIN_PARALLEL_PAIRS"]

_setting: list = [None]  # set_num_threads (a list: no global statement)
_controller: list = []  # the threadpoolctl controller, built once (it scans the loaded libraries)
# the threads of the passes inside blas_single, per calling thread (its own BLAS limit must not cap them)
_pinned = threading.local()


@declare(n=AnyOf(NONE, Integer(1)))
def set_num_threads(n: int | None = None) -> None:
    """Set the threads of the compiled passes (None: back to ``HEADFLOW_NUM_THREADS`` or the CPUs).

    Examples
    --------
    >>> import particles
    >>> particles.set_num_threads(1)
    >>> particles.num_threads()
    1
    >>> particles.set_num_threads(None)
    """
    _setting[0] = None if n is None else int(n)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _pool_limit() -> int | None:
    """The smallest current thread limit of the BLAS / OpenMP pools (threadpoolctl), or of the usual
    environment variables when threadpoolctl is not installed."""
    try:
        controller = _blas_controller()
    except ImportError:
        limits = [os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")]
        values = [int(v) for v in limits if v and v.strip().isdigit() and int(v) > 0]
        return min(values) if values else None
    values = [int(p["num_threads"]) for p in controller.info() if p.get("num_threads")]
    return min(values) if values else None


@declare()
def num_threads() -> int:
    """Threads of the compiled passes: the setting, capped by the thread pools' current limits (module
    docstring)."""
    if getattr(_pinned, "k", None) is not None:
        return _pinned.k
    n = _setting[0]
    if n is None:
        env = os.environ.get("HEADFLOW_NUM_THREADS", "").strip()
        n = int(env) if env.isdigit() and int(env) > 0 else _cpus()
    limit = _pool_limit()
    return max(1, min(n, limit) if limit else n)


#: below this many (target, source) pairs a pass stays in the calling thread (the hand-off costs more)
MIN_PARALLEL_PAIRS = 2**21
_pools: dict = {}


def _blas_controller():
    from threadpoolctl import ThreadpoolController

    if not _controller:
        _controller.append(ThreadpoolController())
    return _controller[0]


def _limit_blas():
    try:
        return _blas_controller().limit(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return None


@contextmanager
def blas_single(pairs: int, own: bool = False):
    """BLAS on one thread while a pass of ``pairs`` (target, source) pairs may run threads of its own
    (``own``: the fast summation's NUFFT threads; else the exact pass's pool from
    :data:`MIN_PARALLEL_PAIRS` on), when :func:`num_threads` is above 1. An OpenBLAS worker that a
    threaded GEMM woke spins for about 2^28 cycles (~0.1 s) after it, and on a machine with as many
    cores as threads it takes half a core from the pass's threads; the GEMMs around such a pass are
    thin (n × d by d × d), so one BLAS thread costs them little."""
    limit, k, pinned = None, num_threads(), getattr(_pinned, "k", None)
    if pinned is None and (own or pairs >= MIN_PARALLEL_PAIRS) and k > 1:  # (a nested pass: already limited)
        limit, _pinned.k = _limit_blas(), k
    try:
        yield
    finally:
        if limit is not None:
            limit.restore_original_limits()
            _pinned.k = pinned


def snake_chunks(items: list, k: int) -> list:
    """``items`` dealt to ``k`` chunks in snake order (0, 1, ..., k-1, k-1, ..., 0, 0, 1, ...): items whose
    cost falls (or rises) along the list, such as the block rows of a triangle, come out balanced (for two
    chunks of the 16 block rows of a triangle: 68 and 68 tiles, where dealing in turn gives 72 and 64).

    Examples
    --------
    >>> snake_chunks(list(range(8)), 2)
    [[0, 3, 4, 7], [1, 2, 5, 6]]
    """
    chunks = [[] for _ in range(k)]
    for b, item in enumerate(items):
        pos = b % k
        chunks[pos if (b // k) % 2 == 0 else k - 1 - pos].append(item)
    return chunks


def pool_threads(pairs: int) -> int:
    """The threads :func:`parallel_chunks` runs a pass of ``pairs`` (target, source) pairs on."""
    return 1 if pairs < MIN_PARALLEL_PAIRS else num_threads()


def parallel_chunks(items: list, work, pairs: int) -> list:
    """``[work(chunk) for chunk in chunks]`` over the snake-dealt chunks of ``items`` (:func:`snake_chunks`),
    one per thread of :func:`num_threads` on a thread pool (GEMMs and exps release the GIL), the BLAS pool
    limited to one thread meanwhile (the threads are ours: BLAS threads on top would oversubscribe the cores). A small
    pass (``pairs`` below :data:`MIN_PARALLEL_PAIRS`) runs as one chunk in the calling thread, BLAS as
    configured. The chunks are fixed by the thread count, so a result does not depend on the scheduling."""
    if pairs < MIN_PARALLEL_PAIRS:
        return [work(items)]
    k = min(num_threads(), len(items))
    limit = _limit_blas()
    try:
        if k <= 1:
            return [work(items)]
        from concurrent.futures import ThreadPoolExecutor

        if k not in _pools:
            _pools[k] = ThreadPoolExecutor(max_workers=k, thread_name_prefix="headflow")
        return list(_pools[k].map(work, snake_chunks(items, k)))
    finally:
        if limit is not None:
            limit.restore_original_limits()
