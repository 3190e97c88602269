r"""The fused pass of :class:`~particles.Ensemble` for scalar heads (M_h = m_h I, W_h = w_h I).

With a scalar head every logit is :math:`a\langle x_i, x_j\rangle`, :math:`a = \beta m_h`, and
the pass is

.. math:: E_{ij} = \exp(a\langle x_i, x_j\rangle - c),\qquad [S_i, Z_i] = \sum_j E_{ij}\,[x_j, 1],

with the Cauchy–Schwarz shift :math:`c = |a|\max_j\|x_j\|^2` of the system (no max pass, no
overflow; rows that underflow under it are redone with their exact maximum by the exact
summation pass). Being one per system, the shift is a scalar pass over the logits, and the
head's output needs no per-token division where it does not need one: softmax is
:math:`S_i/Z_i`, USA is :math:`\frac1n\sum_j e^{a\langle x_i,x_j\rangle}x_j = (e^c/n)\,S_i`, one
scale per system. The logits, the exps, the sums and the outputs live in per-thread buffers
reused across calls (a fresh S n² or S n d temporary per stage costs page faults comparable to
the exps).

Two layouts, by the number of coordinates d. For d > 4 the state stays token-major (S, n, d):
both GEMMs read contiguous operands (the left one scaled by a, the right one a transposed
copy: a transposed operand costs the small batched GEMMs twice as much), :math:`Z` is a batched
matrix-vector product, and every per-token operation (the division by :math:`Z_i`, the tangent
projection) is one broadcast pass; numpy runs those as one inner loop of d entries per token, so
they are kept to what the output needs. For d <= 4 the work runs coordinate by coordinate on the
coordinate-major sums (S, d + 1, n): numpy then runs one strided loop over all S n rows instead
of one inner loop of d entries per row.

Measured and not kept (numpy, n = 32, d = 2, one thread): forming the Gram matrix by
broadcasting (about twice the batched GEMM's time); one exp per unordered pair of the symmetric
logits, through offsets k = 1..n/2 and strided views (half the exps, 2.5x slower overall), per
pair of token blocks through einsum (10x slower), or as three exp'd blocks of a half split and a
transposed copy (25-40 % slower); a coordinate-major state (each coordinate one contiguous row)
or the whole-stack row-wise work before and after the chunks (no gain, within noise). For d > 4
the token-major pass replaced the layout of d <= 4 (the shift as an extra GEMM column, sums
coordinate-major): at d = 32, 256 systems of 32 tokens, writing the (S, n, d + 1) operand took
0.19 ms and the transposed means 0.32 ms, against 0.32 ms for one GEMM; a USA evaluation went
from 2.96 to 2.16 ms (0.91 from 1.07 ms at d = 8). Buffering the Dormand–Prince stages as well
(one (7, S, n, d) array per thread) gained nothing measurable. A numba-compiled pass for d <= 4
(the upper triangle's logits packed by a compiled loop, ``np.exp`` on those n(n+1)/2 entries, the
pair sums accumulated in compiled loops) took 0.86-0.96 ms against 0.47 ms for this pass at d = 2:
the compiled scalar loops cost more than the half of the exps they save (numba's own exp is ~6x
slower than ``np.exp``: its LLVM has no vector math library), so numba was not added.
"""

from __future__ import annotations

import numpy as np

from .._core.blocking import Workspace
from .._core.errors import SolverError
from .._core.sphere import FEW_COORDS, _project_tangent, _rowdot
from .._summation.exact import _UNDERFLOW, _finish
from .kinds import LOG_OVERFLOW

__all__ = ["scalar_head", "usa_scale", "Workspace", "WORK"]


#: the buffers of this thread (a velocity evaluation never calls another one)
WORK = Workspace()


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
    S, n, d = x.shape
    shift = np.abs(a) * (1.0 if unit else _rowdot(x, x).max(axis=1))
    if d <= FEW_COORDS:
        f, logz = _few_coords(x, a, shift, work, usa_n is not None, tangent, weights)
    else:
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
    _check_overflow(logscale.max(axis=-1), s0)
    mean *= np.exp(logscale)[..., None]
    return mean


def _check_overflow(top_per_system: np.ndarray, s0: int) -> None:
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
        _check_overflow(logz_top - np.log(usa_n), s0)
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


def _few_coords(x, a, shift, work, logz, tangent, weights):
    """(mean, log Z if ``logz``) for d <= 4, coordinate by coordinate: the shift rides along the
    logit GEMM as an extra column, ``[a x_i, -c] · [x_j, 1]``, and the sums come out
    coordinate-major (S, d + 1, n) (E is symmetric: (E Y)^T = Y^T E)."""
    S, n, d = x.shape
    La, Yt = work.get("left", (S, n, d + 1)), work.get("right", (S, d + 1, n))
    for c in range(d):
        np.multiply(x[..., c], a[:, None], out=La[..., c])
        Yt[:, c] = x[..., c]
    La[..., d] = -shift[:, None]
    Yt[:, d] = 1.0
    E = np.matmul(La, Yt, out=work.get("logits", (S, n, n)))
    np.exp(E, out=E)
    Yw = Yt if weights is None else np.multiply(Yt, weights[:, None, :], out=work.get("weighted", Yt.shape))
    out = np.matmul(Yw, E, out=work.get("sums", (S, d + 1, n)))
    z = out[:, d]
    if not z.min() > _UNDERFLOW:  # rows whose shift overshot: the exact pass redoes them
        sums = _redo_rows(La[..., :d], x, Yt.transpose(0, 2, 1), out.transpose(0, 2, 1), shift, weights)
        return (_project_tangent(x, sums.mean) if tangent else sums.mean), sums.logz
    mean = work.get("mean", (S, n, d))
    m = out[:, :d]  # (S, d, n): rows of one coordinate, contiguous
    np.divide(m, z[:, None], out=m)
    if tangent:
        dot = Yt[:, 0] * m[:, 0]
        for c in range(1, d):
            dot += Yt[:, c] * m[:, c]
        for c in range(d):
            m[:, c] -= dot * Yt[:, c]
    for c in range(d):
        mean[..., c] = m[:, c]
    return mean, (shift[:, None] + np.log(z) if logz else None)


def _redo_rows(left, x, xa, sums, shift, weights):
    """The exact pass on the rows whose sums underflowed under the shift (both layouts): it knows
    no weights, which keep Z_i >= w_i E_ii away from underflow when every a >= 0."""
    if weights is not None:
        raise SolverError("a weighted exp sum underflowed (a head with beta m < 0 and merged tokens); "
                          "merge needs score heads m_h >= 0.")
    return _finish(left, x, xa, sums, np.repeat(shift[:, None], x.shape[1], 1))
