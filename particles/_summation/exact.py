r"""The exact passes: exponential sums by row-blocked GEMM + exp (the reference), ReLU sums.

Contract: :func:`exact_exp_sums` returns :math:`(\log Z_i, S_i/Z_i)` of the logits
``L @ Y.T`` without overflow at any β (the logits are shifted by the Cauchy–Schwarz bound
folded into the GEMM; rows that underflow under it are redone with their exact maximum);
memory O(block) per pass, the block from :func:`particles._core.blocking.rows_per_block`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.blocking import DEFAULT_BLOCK_ELEMENTS, rows_per_block
from .._core.threads import parallel_chunks, pool_threads

__all__ = ["HeadSums", "exact_exp_sums", "batched_exp_sums", "relu_sums", "batched_relu_sums", "constant_sums"]

#: largest side of the square tiles of the symmetric pass (``block_elements`` caps it): 256^2 doubles
#: (512 KiB) stay in a core's L2 cache with their operands; 512^2 (the row pass's 2^18 entries) spill, and
#: measured 1.7-2x slower per exp on a 2 MiB-L2 x86 core (n = 1024..4096, d = 3..64)
SYMMETRIC_SIDE = 256
#: the side on the thread pool: two threads contend for the GIL between the numpy calls of their tiles,
#: and 384^2 tiles (1.1 MiB, still in L2) make 2.25x fewer calls: measured at d = 3 on two threads (one
#: process, other jobs paused), n = 4096 8.0 -> 7.3 ms, n = 8192 28.6 -> 26.4 ms (one thread: 12.3 against
#: 13.1 ms, so one thread keeps 256)
SYMMETRIC_SIDE_POOL = 384
#: entries of one row tile for d <= 16 (the default 2^18 = 2 MiB for wider heads): with few coordinates the
#: exp and the reads of the tile, not the GEMMs, set the cost, and a 1 MiB tile stays in L2 beside its
#: operands. One thread, 2^17 against 2^18: d = 3, n = 1024 / 4096 / 8192 / 16384: 1.77 / 25.6 / 117 / 523
#: against 2.39 / 36.0 / 144 / 604 ms; d = 8: 40.8 against 43.5; d = 16: 55.4 against 56.9; d = 32: 83.9
#: against 79.4 ms (there the larger GEMMs win)
ROW_ELEMENTS_FEW = 2**17
# a row partition function below this (in shifted units) is recomputed with the exact max:
# e^{-575} ~ 1e-250 leaves ~58 decades above the subnormal range for the row's sum of n terms
_UNDERFLOW = 1e-250


@dataclass(frozen=True)
class HeadSums:
    """Sums of one head over all target rows.

    ``exp`` kinds: ``logz[i] = log Z_i``, ``mean[i] = S_i / Z_i``; ``relu`` kinds: ``logz``
    is ``None``, ``total[i] = Σ_j ReLU(β s_ij)``, ``mean[i] = Σ_j ReLU(β s_ij) y_j``.
    ``method`` is ``"exact"`` or the fast route used, ``bound`` the a-posteriori bound
    max_i η_i on the relative error of Z_i (0 for exact sums: round-off only), ``n_exact``
    the rows recomputed exactly, ``reason`` why "auto" chose the exact pass (else "").
    """

    mean: np.ndarray
    logz: np.ndarray | None = None
    total: np.ndarray | None = None
    method: str = "exact"
    bound: float = 0.0
    n_exact: int = 0
    reason: str = ""


def _with_column(A: np.ndarray, col) -> np.ndarray:
    """[A, col]: one extra column, so that a shift or a row sum rides along a GEMM."""
    out = np.empty((A.shape[0], A.shape[1] + 1))
    out[:, :-1] = A
    out[:, -1] = col
    return out


def _values(Y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """[w ⊙ Y, w]: the right factor whose product with exp(logits) gives [S, Z]."""
    Ya = _with_column(Y, 1.0)
    if w is not None:
        Ya *= w[:, None]
    return Ya


def _finish(L, Y, Ya, out, logshift) -> HeadSums:
    """Normalise the accumulated [S, Z] (any leading batch axes: L (..., m, d), Y and Ya
    (..., n, ·)); rows whose Z underflowed under the Cauchy–Schwarz shift (it overshot the
    true row max by > ~575) are recomputed with the exact row max."""
    d = Y.shape[-1]
    z = out[..., d]
    bad = np.nonzero(~(z > _UNDERFLOW))
    if bad[0].size:
        rows = L[bad]  # (k, d)
        src = Y if Y.ndim == 2 else Y[bad[:-1]]  # (n, d) shared, or (k, n, d) per row's system
        val = Ya if Ya.ndim == 2 else Ya[bad[:-1]]
        T = rows @ src.T if src.ndim == 2 else np.einsum("kd,knd->kn", rows, src)
        # weights enter linearly, so a zero-weight column must not set the max
        mx = np.where(val[..., d] > 0, T, -np.inf).max(axis=1)
        T = np.exp(T - mx[:, None])
        out[bad] = T @ val if val.ndim == 2 else np.einsum("kn,kne->ke", T, val)
        logshift[bad] = mx
        z = out[..., d]
    with np.errstate(divide="ignore", invalid="ignore"):
        # a row with no mass at all (every weight 0) has log Z = -inf and no mean, on purpose
        return HeadSums(mean=out[..., :d] / z[..., None], logz=logshift + np.log(z))


def batched_exp_sums(L: np.ndarray, Y: np.ndarray) -> HeadSums:
    r""":func:`exact_exp_sums` over a leading batch axis: ``L`` (S, m, d), ``Y`` (S, n, d), one
    independent system per batch entry, unit weights, no row blocking (the caller chunks the
    batch so that S m n doubles fit its memory). The same shifted GEMM + exp + GEMM.

    >>> L = np.zeros((2, 3, 2)); Y = np.ones((2, 4, 2))
    >>> np.allclose(batched_exp_sums(L, Y).logz, np.log(4))
    True
    """
    R = np.sqrt(np.max(np.einsum("snd,snd->sn", Y, Y), axis=1))[:, None]
    shift = np.sqrt(np.einsum("smd,smd->sm", L, L)) * R
    La = np.concatenate([L, -shift[..., None]], axis=-1)
    Ya = np.concatenate([Y, np.ones(Y.shape[:-1] + (1,))], axis=-1)
    T = La @ Ya.transpose(0, 2, 1)
    np.exp(T, out=T)
    return _finish(L, Y, Ya, T @ Ya, shift)


def exact_exp_sums(L: np.ndarray, Y: np.ndarray, w: np.ndarray | None, block_elements: int | None = None,
                   symmetric: bool = False) -> HeadSums:
    r"""Exact :math:`(\log Z_i, S_i/Z_i)` of the logits ``L @ Y.T`` (row-blocked GEMM + exp).

    Parameters
    ----------
    L : ndarray of shape (m, d)
        Left factors :math:`\beta M^\top x_i` of the targets (logit :math:`\langle L_i, y_j\rangle`).
    Y : ndarray of shape (n, d)
        Sources (keys and values).
    w : ndarray of shape (n,) or None
        Source weights (None: all 1).
    block_elements : int, optional
        Entries of one logit tile at most (default :data:`~particles._core.blocking.DEFAULT_BLOCK_ELEMENTS`;
        the symmetric pass's square tiles are at most :data:`SYMMETRIC_SIDE` on a side, or
        :data:`SYMMETRIC_SIDE_POOL` on the thread pool; the row tiles of d <= 16 at most
        :data:`ROW_ELEMENTS_FEW`).
    symmetric : bool
        The logit matrix is symmetric (targets are the sources and M = Mᵀ): each
        off-diagonal tile then serves both its rows and, transposed, its columns, so half
        the exps are done, under one global shift.
    """
    m, d = L.shape
    n = Y.shape[0]
    R = float(np.sqrt(np.max(np.einsum("ij,ij->i", Y, Y))))
    Ya = _values(Y, w)
    YaT = np.ascontiguousarray(_with_column(Y, 1.0).T)
    if symmetric:
        shift = float(np.sqrt(np.max(np.einsum("ij,ij->i", L, L)))) * R
        La = _with_column(L, -shift)
        top = SYMMETRIC_SIDE_POOL if pool_threads(m * n // 2) > 1 else SYMMETRIC_SIDE
        side = max(64, min(top, int(np.sqrt(block_elements or DEFAULT_BLOCK_ELEMENTS))))

        def rows(starts):  # the tiles of the block rows I (and, transposed, of their columns)
            out = np.zeros((m, d + 1))  # each chunk its own sums (one pool thread may run two chunks)
            tile = np.empty((side, side))
            for I in starts:
                sI = slice(I, min(m, I + side))
                for J in range(I, m, side):
                    sJ = slice(J, min(m, J + side))
                    T = tile[: sI.stop - sI.start, : sJ.stop - sJ.start]
                    np.matmul(La[sI], YaT[:, sJ], out=T)
                    np.exp(T, out=T)
                    out[sI] += T @ Ya[sJ]
                    if J != I:
                        out[sJ] += T.T @ Ya[sI]
            return out

        # block rows dealt in snake order balance the threads (row I holds (m - I) / side tiles)
        parts = parallel_chunks(list(range(0, m, side)), rows, m * n // 2)
        out = parts[0]
        for part in parts[1:]:
            out += part
        return _finish(L, Y, Ya, out, np.full(m, shift))
    shift = np.sqrt(np.einsum("ij,ij->i", L, L)) * R
    La = _with_column(L, -shift)
    out = np.empty((m, d + 1))
    cap = block_elements or DEFAULT_BLOCK_ELEMENTS  # (at most: a narrow head's tiles stop at ROW_ELEMENTS_FEW)
    B = rows_per_block(m, n, min(cap, ROW_ELEMENTS_FEW) if d <= 16 else cap)

    def blocks(starts):
        tile = np.empty((B, n))
        for start in starts:
            stop = min(m, start + B)
            T = tile[: stop - start]
            np.matmul(La[start:stop], YaT, out=T)
            np.exp(T, out=T)
            np.matmul(T, Ya, out=out[start:stop])

    parallel_chunks(list(range(0, m, B)), blocks, m * n)
    return _finish(L, Y, Ya, out, shift)


def relu_sums(L: np.ndarray, Y: np.ndarray, block_elements: int | None = None) -> HeadSums:
    """Σ_j ReLU(L_i·y_j) y_j and Σ_j ReLU(L_i·y_j), row-blocked (always exact)."""
    m, d = L.shape
    Ya = _with_column(Y, 1.0)
    YT = np.ascontiguousarray(Y.T)
    out = np.empty((m, d + 1))
    B = rows_per_block(m, Y.shape[0], block_elements)
    tile = np.empty((B, Y.shape[0]))
    for start in range(0, m, B):
        stop = min(m, start + B)
        T = tile[: stop - start]
        np.matmul(L[start:stop], YT, out=T)
        np.maximum(T, 0.0, out=T)
        np.matmul(T, Ya, out=out[start:stop])
    return HeadSums(mean=out[:, :d], total=out[:, d])




def batched_relu_sums(L: np.ndarray, Y: np.ndarray) -> HeadSums:
    """:func:`relu_sums` over a leading batch axis (``L`` (S, m, d), ``Y`` (S, n, d)), unblocked
    as :func:`batched_exp_sums`."""
    T = np.maximum(L @ Y.transpose(0, 2, 1), 0.0)
    return HeadSums(mean=T @ Y, total=T.sum(axis=2))


def constant_sums(m: int, sources: np.ndarray, w: np.ndarray | None) -> HeadSums:
    """All logits 0: Z = Σ_j w_j and the mean is the weighted mean, the same for every row."""
    wts = np.ones(sources.shape[0]) if w is None else w
    z = float(wts.sum())
    mean = (wts @ sources) / z
    return HeadSums(np.tile(mean, (m, 1)), np.full(m, np.log(z)))


