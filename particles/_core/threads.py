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

__all__ = ["num_threads", "set_num_threads"]

_setting: list = [None]  # set_num_threads (a list: no global statement)
_controller: list = []  # the threadpoolctl controller, built once (it scans the loaded libraries)


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
    from .validation import check_param

    _setting[0] = None if n is None else check_param(n, "n", "set_num_threads", low=1, integer=True)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _pool_limit() -> int | None:
    """The smallest current thread limit of the BLAS / OpenMP pools (threadpoolctl), or of the usual
    environment variables when threadpoolctl is not installed."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        limits = [os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")]
        values = [int(v) for v in limits if v and v.strip().isdigit() and int(v) > 0]
        return min(values) if values else None
    if not _controller:
        _controller.append(ThreadpoolController())
    values = [int(p["num_threads"]) for p in _controller[0].info() if p.get("num_threads")]
    return min(values) if values else None


def num_threads() -> int:
    """Threads of the compiled passes: the setting, capped by the thread pools' current limits (module
    docstring)."""
    n = _setting[0]
    if n is None:
        env = os.environ.get("HEADFLOW_NUM_THREADS", "").strip()
        n = int(env) if env.isdigit() and int(env) > 0 else _cpus()
    limit = _pool_limit()
    return max(1, min(n, limit) if limit else n)
