"""One blocking rule for every pass that would otherwise hold an (m, n) array.

A pass over m target rows and n sources works on row blocks of ``rows_per_block(m, n,
elements)`` rows, so that one (block, n) temporary holds at most ``elements`` float64s.
Two budgets, for two reasons:

- :data:`DEFAULT_BLOCK_ELEMENTS` (2^18 doubles = 2 MiB): the logit tile of the attention
  sums, sized to stay in a core's L2 cache between the GEMM that fills it and the exp and
  GEMM that consume it (larger tiles measured slower, smaller ones pay Python overhead);
- :data:`WORKING_MEMORY_ELEMENTS` (2^22 doubles = 32 MiB): the temporaries of metrics that
  are not cache-bound (pairwise distances, projections), as scikit-learn's ``working_memory``.
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["DEFAULT_BLOCK_ELEMENTS", "WORKING_MEMORY_ELEMENTS", "rows_per_block", "row_blocks", "Workspace"]

#: entries of one (block x n) logit tile; 2**18 doubles = 2 MiB stays in cache
DEFAULT_BLOCK_ELEMENTS = 2**18
#: entries of the temporaries of a memory-bound pass; 2**22 doubles = 32 MiB
WORKING_MEMORY_ELEMENTS = 2**22


def rows_per_block(m: int, n: int, elements: int | None = None) -> int:
    """Rows of an (m, n) pass per block: at least 1, at most m, ``rows * n <= elements``.

    >>> rows_per_block(1000, 1000, 2**18)
    262
    """
    budget = DEFAULT_BLOCK_ELEMENTS if elements is None else elements
    return max(1, min(m, budget // max(n, 1)))


def row_blocks(m: int, n: int, elements: int | None = None):
    """The slices of :func:`rows_per_block` rows covering ``range(m)``.

    >>> tuple(s.stop for s in row_blocks(5, 4, 8))
    (2, 4, 5)
    """
    step = rows_per_block(m, n, elements)
    return [slice(start, min(m, start + step)) for start in range(0, m, step)]


class Workspace(threading.local):
    """Per-thread buffers keyed by name, grown when a larger one is asked for: a call asks for
    a shape and gets a view of the first entries of its buffer (a last, smaller chunk reuses it;
    the view of a (name, shape) asked for before is kept, and dropped when its buffer grows).
    A buffer above ``keep`` entries is not kept (a fresh array each call): a thread never holds
    more than a few working-memory tiles after its last call."""

    def __init__(self, keep: int = WORKING_MEMORY_ELEMENTS):
        self._bufs, self._views, self.keep, self.busy = {}, {}, keep, False

    def get(self, name: str, shape: tuple) -> np.ndarray:
        # the view of a (name, shape) asked for before comes from one dict lookup: a small-system
        # pass asks for ~7 buffers per call, and building each view cost ~3 % of the pass
        view = self._views.get((name, shape))
        if view is not None:
            return view
        size = math.prod(shape)
        if size > self.keep:
            return np.empty(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.size < size:
            buf = self._bufs[name] = np.empty(size)
            self._views = {key: v for key, v in self._views.items() if key[0] != name}
        if len(self._views) >= 256:  # shapes vary (settling shrinks a stack): keep the cache small
            self._views.clear()
        view = self._views[(name, tuple(shape))] = buf[:size].reshape(shape)
        return view
