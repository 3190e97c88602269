r"""The fused pass of :class:`~particles.Ensemble` for scalar heads (M_h = m_h I, W_h = w_h I).

With a scalar head every logit is :math:`a\langle x_i, x_j\rangle`, :math:`a = \beta m_h`, and
the pass is

.. math:: E_{ij} = \exp(a\langle x_i, x_j\rangle - c),\qquad [S_i, Z_i] = \sum_j E_{ij}\,[x_j, 1],

with the Cauchy–Schwarz shift :math:`c = |a|\max_j\|x_j\|^2` of the system (or of its chunk,
below; no max pass, no overflow; rows that underflow under it are redone with their exact
maximum by the exact summation pass). Being one per system (or chunk), the shift is a scalar
pass over the logits, and the head's output needs no per-token division where it does not need
one: softmax is
:math:`S_i/Z_i`, USA is :math:`\frac1n\sum_j e^{a\langle x_i,x_j\rangle}x_j = (e^c/n)\,S_i`, one
scale per system. The logits, the exps, the sums and the outputs live in per-thread buffers
reused across calls (a fresh S n² or S n d temporary per stage costs page faults comparable to
the exps).

Two layouts, by the number of coordinates d. For d > 4 the state stays token-major (S, n, d):
both GEMMs read contiguous operands (the left one scaled by a, the right one a transposed
copy: a transposed operand costs the small batched GEMMs twice as much), :math:`Z` is a batched
matrix-vector product, and every per-token operation (the division by :math:`Z_i`, the tangent
projection) is one broadcast pass; numpy runs those as one inner loop of d entries per token, so
they are kept to what the output needs. For d <= 4 the operands and the sums are
coordinate-major, (d + 1, S, n): coordinate c of every token of the chunk is one contiguous row of
S n entries, so every per-coordinate pass (the fill, the division by :math:`Z_i`, the tangent
projection) is one loop over S n entries, and the GEMMs read the rows through strided views (BLAS
leading dimension S n, no copy). The shift is one scalar per chunk when the chunk's squared norms
lie within 32/|a| of each other (a full reduce; it overshoots a system's own bound by at most 32,
so no row underflows), else each system's own. Measured at n = 32, d = 2, 256 systems, one
thread, in one process: 0.385 ms per evaluation against 0.45-0.47 ms for the (S, d + 1, n)
layout with a per-system shift (its (S, n) slices ran as S loops of n entries: the finishing
passes took 0.069 ms, now 0.035, the fill 0.028, now 0.021), against 0.214 ms for ``np.exp``
over the S n² logits. The GEMM that writes the logits, their exp and the GEMM that reads them run over
blocks of :data:`L2_LOGITS` // n² systems (64 at n = 32), so the logits stay in a core's L2 cache between the
three calls (a chunk of 512 systems wrote 4 MiB, read back from memory twice). One process, one thread, blocks
against one block per chunk: 1.78 against 2.06 µs per system and evaluation at 512 systems, and the
phase-diagram workload (9 β values x 2048 systems, chunks of 512) 4.39 against 4.95 s (1.13x), with bitwise the
same output (the same per-system BLAS calls).

Measured and not kept (numpy, n = 32, d = 2, one thread): forming the Gram matrix by
broadcasting (about twice the batched GEMM's time); one exp per unordered pair of the symmetric
logits, through offsets k = 1..n/2 and strided views (half the exps, 2.5x slower overall), per
pair of token blocks through einsum (10x slower), or as three exp'd blocks of a half split and a
transposed copy (25-40 % slower); a coordinate-major solver state (each coordinate one contiguous row)
or the whole-stack row-wise work before and after the chunks (no gain, within noise). For d > 4
the token-major pass replaced the layout of d <= 4 (the shift as an extra GEMM column, sums
coordinate-major): at d = 32, 256 systems of 32 tokens, writing the (S, n, d + 1) operand took
0.19 ms and the transposed means 0.32 ms, against 0.32 ms for one GEMM; a USA evaluation went
from 2.96 to 2.16 ms (0.91 from 1.07 ms at d = 8). Buffering the Dormand–Prince stages as well
(one (7, S, n, d) array per thread) gained nothing measurable. A numba-compiled pass for d <= 4
(the upper triangle's logits packed by a compiled loop, ``np.exp`` on those n(n+1)/2 entries, the
pair sums accumulated in compiled loops) took 0.86-0.96 ms against 0.47 ms for the numpy pass
of the time at d = 2: the compiled scalar loops cost more than the half of the exps they save (numba's own exp is ~6x
slower than ``np.exp``: its LLVM has no vector math library), so numba was not added.
"""

from __future__ import annotations

import numpy as np

from .._core.blocking import Workspace
from .._core.errors import SolverError
from .._core.numerics import FEW_COORDS, LOG_OVERFLOW
from .._core.numerics import rowdot as _rowdot
from .._core.sphere import _project_tangent
from .._summation.exact import _UNDERFLOW, _finish

__all__ = ["scalar_head", "usa_scale", "check_overflow", "Workspace", "WORK"]


#: the buffers of this thread (a velocity evaluation never calls another one)
WORK = Workspace()
#: logits of one block of systems (d <= 4): 2^16 doubles (512 KiB) stay in a core's L2 cache between the GEMM
#: that writes them, the exp and the GEMM that reads them
L2_LOGITS = 2**16


def scalar_head(x: np.ndarray, a: np.ndarray, work: Workspace, *, usa_n: int | None = None,
                tangent: bool = False, weights=None, unit: bool = False, s0: int = 0, out=None) -> np.ndarray:
    r"""The output of a scalar head with logits :math:`a_s\langle x_i, x_j\rangle` for every token.

    Softmax (``usa_n`` None): :math:`f_i = S_i/Z_i`, the attention mean. USA: :math:`f_i =
    \frac{1}{n}\sum_j w_j e^{a\langle x_i,x_j\rangle}x_j` with n = ``usa_n``. With ``tangent``,
    :math:`P_{x_i}f_i = f_i - \langle x_i, f_i\rangle x_i` (the projection is linear, so it
    commutes with the sum over heads).

    Parameters
    ----------
    x : ndarray of shape (S, n, d)
        Tokens of S systems (sources and targets).
    a : ndarray of shape (S,)
        :math:`\beta_s m_h` per system.
    work : Workspace
    usa_n : int, optional
        The USA normaliser n (the number of tokens the weights stand for); None for softmax.
    tangent : bool
        Project onto the tangent spaces.
    weights : ndarray of shape (S, n), optional
        Source masses :math:`w_j` (tokens standing for groups of coincident ones). Needs every
        :math:`a \ge 0` (then :math:`Z_i \ge w_iE_{ii}` does not underflow for a token of positive mass).
    unit : bool
        The tokens have unit norm (the shift is then |a|, without a norm pass).
    s0 : int
        Index of the first system in the caller's stack (for the overflow message).
    out : ndarray of shape (S, n, d), optional
        Where to write the output (else a buffer of ``work``, valid until its next call).

    Raises
    ------
    SolverError
        A USA row weight :math:`\log(Z_i e^c/n)` past the float64 range (names the system).
    """
    if x.shape[2] <= FEW_COORDS:
        f, logz = _few_coords(x, a, unit, work, usa_n is not None, tangent, weights, out)
    else:
        shift = np.abs(a) * (1.0 if unit else _rowdot(x, x).max(axis=1))
        f, logz = _token_major(x, a, shift, work, usa_n, tangent, weights, out, s0)
    if usa_n is not None and logz is not None:  # the per-row scale (few coordinates, rare rows)
        usa_scale(f, logz, usa_n, s0)
    if out is not None and f is not out:
        out[...] = f
        return out
    return f


def usa_scale(mean: np.ndarray, logz: np.ndarray, n: int, s0: int = 0) -> np.ndarray:
    r"""USA output from the attention mean, in place: :math:`(Z_i/n)\,S_i/Z_i`, the scale taken
    from :math:`\log Z_i` (never an overflowing exp). Raises :class:`SolverError` naming the
    system (``s0`` + its index) when :math:`\log(Z_i/n)` passes the float64 range."""
    logscale = logz - np.log(n)
    check_overflow(logscale.max(axis=-1), s0)
    mean *= np.exp(logscale)[..., None]
    return mean


def check_overflow(top_per_system: np.ndarray, s0: int) -> None:
    top = float(top_per_system.max())
    if top > LOG_OVERFLOW:
        s = s0 + int(np.argmax(top_per_system))
        raise SolverError(
            f"USA head of Ensemble overflows float64 in system {s}: the log of its largest row weight is "
            f"{top:.1f} > {LOG_OVERFLOW:g}; lower beta (or use kind='softmax')."
        )


def _token_major(x, a, shift, work, usa_n, tangent, weights, out, s0):
    """(output, None) with the USA scale applied, or (softmax mean / USA mean, log Z) when the
    per-row scale is needed (rows redone by the exact pass, or a shift past the float64 range)."""
    S, n, d = x.shape
    left = np.multiply(x, a[:, None, None], out=work.get("left", x.shape))
    right = work.get("right", (S, d, n))
    right[...] = x.transpose(0, 2, 1)
    E = np.matmul(left, right, out=work.get("logits", (S, n, n)))
    E -= shift[:, None, None]
    np.exp(E, out=E)
    if weights is not None:
        E *= weights[:, None, :]
    f = np.matmul(E, x, out=out if out is not None else work.get("sums", x.shape))
    ones = work.get("ones", (S, n, 1))
    ones[...] = 1.0
    z = np.matmul(E, ones, out=work.get("z", (S, n, 1)))
    logz = None
    if not z.min() > _UNDERFLOW:  # rows whose shift overshot: the exact pass redoes them
        xa = np.concatenate([x, np.ones((S, n, 1))], axis=-1)
        sums = _redo_rows(left, x, xa, np.concatenate([f, z], axis=-1), shift, weights)
        f[...], logz = sums.mean, sums.logz
    elif usa_n is None:
        f /= z
    else:
        logz_top = shift + np.log(z[..., 0].max(axis=1))
        check_overflow(logz_top - np.log(usa_n), s0)
        scale = shift - np.log(usa_n)
        if scale.max() <= LOG_OVERFLOW:  # one scale per system: (e^c/n) S_i
            f *= np.exp(scale)[:, None, None]
        else:  # a shift past the float64 range (flat tokens with tiny Z): the per-row scale
            f /= z
            logz = shift[:, None] + np.log(z[..., 0])
    if tangent:
        dot = np.einsum("snd,snd->sn", x, f)
        f -= np.multiply(x, dot[..., None], out=work.get("along", x.shape))
    return f, logz


def _few_coords(x, a, unit, work, logz, tangent, weights, out):
    """(output, log Z if ``logz``) for d <= 4 on coordinate-major operands (d + 1, S, n): row c
    holds coordinate c of every token of the chunk, contiguous, so each per-coordinate pass is
    one loop over S n entries (a (S, n) slice of a (S, d + 1, n) array is S loops of n). The
    GEMMs read the rows through strided views (BLAS leading dimension S n); the shift rides
    along the logit GEMM as an extra column, ``[a x_i, -c] · [x_j, 1]``, and the sums come out
    coordinate-major (E is symmetric: (E Y)^T = Y^T E)."""
    S, n, d = x.shape
    LA, YT = work.get("left", (d + 1, S, n)), work.get("right", (d + 1, S, n))
    for c in range(d):
        YT[c] = x[..., c]
    if unit:
        shift = np.abs(a)
    else:  # |a| max_j |x_j|^2, from the contiguous rows (LA[0] is scratch until written below)
        sq = np.multiply(YT[0], YT[0], out=LA[0])
        for c in range(1, d):
            sq += np.multiply(YT[c], YT[c], out=LA[d])
        # one scalar for the chunk when its norms are close (a full reduce; a per-system reduce over
        # rows of n entries costs 15 us), which overshoots a system's own bound by at most 32: no
        # underflow. Else (norms far apart, e.g. flat tokens) each system's own bound.
        top, scale = sq.max(), np.abs(a)
        shift = scale * (top if scale.max() * (top - sq.min()) <= 32.0 else sq.max(axis=1))
    for c in range(d):
        np.multiply(YT[c], a[:, None], out=LA[c])
    LA[d] = -shift[:, None]
    YT[d] = 1.0
    Yw = YT if weights is None else np.multiply(YT, weights, out=work.get("weighted", YT.shape))
    O = work.get("sums", (d + 1, S, n))
    B = max(1, min(S, L2_LOGITS // (n * n)))  # systems per block: their logits stay in L2 from GEMM to GEMM
    E = work.get("logits", (B, n, n))
    for s0 in range(0, S, B):
        sl = slice(s0, min(S, s0 + B))
        Eb = E[: sl.stop - s0]
        np.matmul(LA[:, sl].transpose(1, 2, 0), YT[:, sl].transpose(1, 0, 2), out=Eb)
        np.exp(Eb, out=Eb)
        np.matmul(Yw[:, sl].transpose(1, 0, 2), Eb, out=O[:, sl].transpose(1, 0, 2))
    z = O[d]
    if not z.min() > _UNDERFLOW:  # rows whose shift overshot: the exact pass redoes them
        sums = _redo_rows(LA.transpose(1, 2, 0)[..., :d], x, YT.transpose(1, 2, 0), O.transpose(1, 2, 0),
                          shift, weights)
        return (_project_tangent(x, sums.mean) if tangent else sums.mean), sums.logz
    dest = out if out is not None else work.get("mean", (S, n, d))
    tmp, rz = work.get("tmp", (S, n)), np.divide(1.0, z, out=work.get("rz", (S, n)))
    if tangent:  # <x_i, S_i> / Z_i, for f_i = S_i / Z_i - <x_i, f_i> x_i
        dot = np.multiply(YT[0], O[0], out=work.get("dot", (S, n)))
        for c in range(1, d):
            dot += np.multiply(YT[c], O[c], out=tmp)
        dot *= rz
    for c in range(d):
        if tangent:
            np.multiply(O[c], rz, out=tmp)
            np.subtract(tmp, np.multiply(dot, YT[c], out=O[c]), out=dest[..., c])
        else:
            np.multiply(O[c], rz, out=dest[..., c])
    return dest, (shift[:, None] + np.log(z) if logz else None)


def _redo_rows(left, x, xa, sums, shift, weights):
    """The exact pass on the rows whose sums underflowed under the shift (both layouts): it knows
    no weights, which keep Z_i >= w_i E_ii away from underflow when every a >= 0."""
    if weights is not None:
        raise SolverError("a weighted exp sum underflowed (a head with beta m < 0 and merged tokens); "
                          "merge needs score heads m_h >= 0.")
    return _finish(left, x, xa, sums, np.repeat(shift[:, None], x.shape[1], 1))
