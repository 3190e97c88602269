r"""The fused pass of :class:`~particles.Ensemble` for scalar heads (M_h = m_h I, W_h = w_h I).

With a scalar head every logit is :math:`a\langle x_i, x_j\rangle`, :math:`a = \beta m_h`, and
the pass is

.. math:: E_{ij} = \exp(a\langle x_i, x_j\rangle - c),\qquad [S_i, Z_i] = \sum_j E_{ij}\,[x_j, 1],

with the Cauchy–Schwarz shift :math:`c = |a|\max_j\|x_j\|^2` of the system (no max pass, no
overflow; rows that underflow under it are redone with their exact maximum by the exact
summation pass). The shift rides along the logit GEMM as an extra column,
``[a x_i, -c] · [x_j, 1]``, and being one per system it keeps E symmetric; the
logits, the exps, the sums and the means live in per-thread buffers that are reused across calls
(a fresh S n² or S n d temporary per stage costs page faults comparable to the exps: at d = 32
they were more than half of an evaluation). For d <= 4 the row-wise work
(norms, the extra columns, the normalisation) runs coordinate by coordinate: numpy then runs one
strided loop over all S n rows instead of one inner loop of d entries per row.

Measured and not kept (numpy, n = 32, d = 2, one thread): forming the Gram matrix by
broadcasting (about twice the batched GEMM's time); one exp per unordered pair of the symmetric
logits, through offsets k = 1..n/2 and strided views (half the exps, 2.5x slower overall), per
pair of token blocks through einsum (10x slower), or as three exp'd blocks of a half split and a
transposed copy (25-40 % slower); a coordinate-major state (each coordinate one contiguous row)
or the whole-stack row-wise work before and after the chunks (no gain, within noise).
"""

from __future__ import annotations

import numpy as np

from .._core.blocking import Workspace
from .._core.errors import SolverError
from .._core.sphere import FEW_COORDS, _project_tangent
from .._summation.exact import _UNDERFLOW, HeadSums, _finish

__all__ = ["exp_sums", "Workspace", "WORK"]


#: the buffers of this thread (a velocity evaluation never calls another one)
WORK = Workspace()


def exp_sums(x: np.ndarray, a: np.ndarray, work: Workspace, logz: bool, tangent: bool = False,
             weights=None) -> HeadSums:
    r""":math:`S_i/Z_i` (and :math:`\log Z_i` if ``logz``) of the logits :math:`a_s\langle x_i, x_j\rangle`.

    One shift per system, :math:`c = |a|\max_j\|x_j\|^2 \ge a\langle x_i, x_j\rangle` (Cauchy–Schwarz),
    keeps :math:`E_{ij} = e^{a\langle x_i,x_j\rangle - c}` symmetric, so the sums are
    :math:`[S, Z]^\top = Y^\top E` with :math:`Y^\top = [x, 1]^\top` stored coordinate-major: both
    GEMMs then read contiguous operands (a transposed operand costs the small batched GEMMs
    about twice as much).

    Parameters
    ----------
    x : ndarray of shape (S, n, d)
        Tokens of S systems (sources and targets).
    a : ndarray of shape (S,)
        :math:`\beta_s m_h` per system.
    work : Workspace
    logz : bool
        Also return :math:`\log Z_i` (USA heads); softmax needs the mean only.
    tangent : bool
        Return :math:`P_{x_i}(S_i/Z_i) = S_i/Z_i - \langle x_i, S_i/Z_i\rangle x_i` as ``mean`` (the
        projection is linear, so it commutes with the USA scale and the sum over heads; it is
        done here on the contiguous coordinate rows, in the order of the sphere's projection).
    weights : ndarray of shape (S, n), optional
        Source masses :math:`w_j`: the sums are :math:`\sum_j w_jE_{ij}[x_j, 1]` (tokens standing
        for groups of coincident ones). Needs every :math:`a \ge 0` (then :math:`Z_i \ge w_iE_{ii}`
        does not underflow for a token of positive mass).

    Returns
    -------
    HeadSums
        ``mean`` is a buffer of ``work``: valid until the next call with the same workspace (the
        caller consumes it first; the rows the exact pass redoes come back as fresh arrays).
    """
    S, n, d = x.shape
    few = d <= FEW_COORDS
    La, Yt = work.get("left", (S, n, d + 1)), work.get("right", (S, d + 1, n))
    if few:
        sq = x[..., 0] * x[..., 0]
        for c in range(1, d):
            sq += x[..., c] * x[..., c]
        for c in range(d):
            np.multiply(x[..., c], a[:, None], out=La[..., c])
            Yt[:, c] = x[..., c]
    else:
        sq = np.einsum("snd,snd->sn", x, x)
        np.multiply(x, a[:, None, None], out=La[..., :d])
        Yt[:, :d] = x.transpose(0, 2, 1)
    shift = np.abs(a) * sq.max(axis=1)
    La[..., d] = -shift[:, None]
    Yt[:, d] = 1.0
    E = np.matmul(La, Yt, out=work.get("logits", (S, n, n)))
    np.exp(E, out=E)
    Yw = Yt if weights is None else np.multiply(Yt, weights[:, None, :], out=work.get("weighted", Yt.shape))
    out = np.matmul(Yw, E, out=work.get("sums", (S, d + 1, n)))  # E symmetric: (E Y)^T = Y^T E
    z = out[:, d]
    if not z.min() > _UNDERFLOW:  # rows whose shift overshot: the exact pass redoes them
        if weights is not None:  # the exact pass knows no weights
            raise SolverError("a weighted exp sum underflowed (a head with beta m < 0 and merged tokens); "
                              "merge needs score heads m_h >= 0.")
        sums = _finish(La[..., :d], x, Yt.transpose(0, 2, 1), out.transpose(0, 2, 1), np.repeat(shift[:, None], n, 1))
        return HeadSums(mean=_project_tangent(x, sums.mean), logz=sums.logz) if tangent else sums
    mean = work.get("mean", (S, n, d))
    if few:
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
    else:
        np.divide(out[:, :d], z[:, None], out=mean.transpose(0, 2, 1))
        if tangent:  # in place: a fresh (S, n, d) product costs page faults comparable to the GEMMs
            along = np.multiply(x, np.einsum("snd,snd->sn", x, mean)[..., None], out=work.get("along", (S, n, d)))
            mean -= along
    return HeadSums(mean=mean, logz=shift[:, None] + np.log(z) if logz else None)
