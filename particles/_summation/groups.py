"""Transform groups: heads evaluated through one type-1 and one batched type-2 NUFFT.

Contract: :func:`build_groups` turns the routes of the heads into :class:`Group` objects (points
scaled into the periodic box, per-head Fourier coefficients, the truncation + aliasing error
per unit ‖c‖₁ of each head); :func:`run_group` returns the real columns [T, S] per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import erfc, ive

from .._core.numerics import rowdot
from .routes import Transforms, _pack, _truncate_bessel, _truncate_gauss, _unpack

__all__ = ["Group", "GroupRun", "build_groups", "run_group", "fine_grid"]


@dataclass
class Group:
    """Heads evaluated through one type-1 and one batched type-2 transform."""

    heads: list  # head indices
    route: str
    src: np.ndarray  # (n, r) source coordinates (angles for circle)
    tgt: np.ndarray  # (m, r)
    c: np.ndarray  # (n,) non-negative strengths shared by the heads
    offset: list  # per head, (m,) or float: log Z_i = offset + log T_i
    # per head, per axis: a function K -> (coefficients of modes -K..K)
    coef: list
    n_modes: tuple
    model_err: list  # per head: truncation + aliasing error per unit ‖c‖₁
    same: bool = False  # the targets are the sources (one set of points for both transforms)
    # scalar route: S from the gradient of T (one type-1 column); per head (|a|, the G_h factor of S's
    # bound per axis, over |a| max|y|), the physical frequencies 2πk/P per axis, the targets, max|x|/max|y|
    grad: list | None = None
    freqs: list | None = None
    points: np.ndarray | None = None
    rho: float = 1.0


def build_groups(infos, targets, sources, w, tol_model):
    """Assemble the transform groups for the heads with a fast route."""
    groups = []
    wts = np.ones(sources.shape[0]) if w is None else w
    circle = [h for h, i in infos.items() if i.route == "circle"]
    if circle:
        th = np.arctan2(targets[:, 1], targets[:, 0])[:, None]
        ph = np.arctan2(sources[:, 1], sources[:, 0])[:, None]
        Ks, coefs, errs = [], [], []
        for h in circle:
            K, err = _truncate_bessel(infos[h].a, tol_model)
            Ks.append(K)
            errs.append(err)
        K = max(Ks)
        k = np.arange(-K, K + 1)
        for h in circle:
            a, alpha = infos[h].a, infos[h].alpha
            coefs.append([ive(np.abs(k), a) * np.exp(-1j * k * alpha)])
        groups.append(Group(circle, "circle", ph, th, wts, [abs(infos[h].a) for h in circle], coefs,
                             (2 * K + 1,), errs, same=targets is sources))
    scalar = sorted((h for h, i in infos.items() if i.route == "scalar"), key=lambda h: abs(infos[h].a))
    # heads whose |a| differ by more than 4x would force the wide box of the smaller onto the larger
    batches, cur = [], []
    for h in scalar:
        if cur and abs(infos[h].a) > 4 * abs(infos[cur[0]].a):
            batches.append(cur)
            cur = []
        cur.append(h)
    if cur:
        batches.append(cur)
    for hs in batches:
        r = targets.shape[1]
        sig = [1.0 / np.sqrt(abs(infos[h].a)) for h in hs]
        groups.append(_gauss_group(hs, "scalar", targets, sources, wts, sig, [infos[h].a < 0 for h in hs],
                                   [abs(infos[h].a) for h in hs], tol_model, r, centre=np.zeros(r)))
    for h, i in infos.items():
        if i.route != "gauss":
            continue
        q = (targets @ i.U) * np.sqrt(i.s)
        kk = (sources @ i.Vt.T) * np.sqrt(i.s)
        k2 = 0.5 * np.einsum("ij,ij->i", kk, kk)
        kap = float(k2.max())
        c = wts * np.exp(k2 - kap)
        off = 0.5 * np.einsum("ij,ij->i", q, q) + kap
        lo = np.minimum(q.min(0), kk.min(0))
        hi = np.maximum(q.max(0), kk.max(0))
        g = _gauss_group([h], "gauss", q, kk, c, [1.0], [False], [off], tol_model, q.shape[1],
                         centre=0.5 * (lo + hi), extent=hi - lo)
        # the dropped singular values perturb every logit by at most their sum: e^{that} − 1 relative
        if i.dropped:
            ynorm = max_norm(sources)
            xnorm = ynorm if targets is sources else max_norm(targets)
            g.model_err[0] += float(np.expm1(i.dropped * xnorm * ynorm))
        groups.append(g)
    return groups


def max_norm(X):
    return float(np.sqrt(np.max(rowdot(X, X))))


def _gauss_group(heads, route, tgt, src, c, sigmas, flips, offsets, tol_model, r, centre, extent=None):
    """A periodised Gauss transform for heads of widths ``sigmas`` sharing points and strengths."""
    if extent is None:
        # scalar heads on the sphere: every point and its reflection lie in [-1, 1]^r
        extent = np.full(r, 2.0)
    smax = max(sigmas)
    if route == "scalar":
        # the gradient that gives S errs by ~δσ times the value's aliasing (_gradient_terms): more modes
        tol_model = tol_model / (1 + np.sqrt(2 * np.log(4.0 / tol_model)) * smax)
    # aliasing: the nearest periodic image of a difference is ≥ δσ_max away, e^{-δ²/2} ≤ budget
    delta = np.sqrt(2 * np.log(4.0 / tol_model))
    P = extent + delta * smax
    alias = float(2.02 * np.exp(-0.5 * delta**2))
    Ks = np.zeros((len(heads), r), dtype=int)
    errs = []
    for a_, s in enumerate(sigmas):
        tail = 0.0
        for ax in range(r):
            Ks[a_, ax], t = _truncate_gauss(s, P[ax], tol_model / (2 * r))
            tail += t
        errs.append(r * alias * (1 + alias) ** (r - 1) + tail * (1 + alias) ** (r - 1))
    K = Ks.max(axis=0)
    coefs = []
    for s, flip in zip(sigmas, flips):
        per_axis = []
        for ax in range(r):
            k = np.arange(-K[ax], K[ax] + 1)
            per_axis.append(np.sqrt(2 * np.pi) * s / P[ax] * np.exp(-0.5 * (2 * np.pi * k * s / P[ax]) ** 2))
        coefs.append((per_axis, flip))
    scale = 2 * np.pi / P
    t_pts = (tgt - centre) * scale if np.any(centre) else tgt * scale
    s_pts = t_pts if tgt is src else (src - centre) * scale
    g = Group(list(heads), route, s_pts, t_pts, c, list(offsets), coefs, tuple(int(2 * k + 1) for k in K), errs,
              same=tgt is src)
    if route == "scalar":
        ymax = max_norm(src)
        _gradient_terms(g, sigmas, P, K, delta, alias, ymax if tgt is src else max_norm(tgt), ymax)
        g.points = tgt
    return g


def _gradient_terms(g: Group, sigmas, P, K, delta, alias, xmax, ymax) -> None:
    r"""The scalar route's S from T: with :math:`g = e^{-|x-y|^2/2\sigma^2}`, :math:`|a| = \sigma^{-2}`,
    :math:`\nabla_x T = -|a|(x T - S)` (:math:`+` for a reflected head), so :math:`S = \pm(xT + \nabla T/|a|)`
    and one real type-1 column (the weights) serves T and S. S's error is :math:`|x|` times T's plus
    :math:`1/|a|` times the gradient's; per axis the gradient's model error is the derivative's aliasing
    (:math:`|g_1'(z)| \le (\delta/\sigma)e^{-\delta^2/2}` beyond δσ) and Fourier tail, times the other
    axes' values, plus :math:`\max|g_1'| = 1/(\sigma\sqrt e)` times their value error. All S terms are
    folded into the head's model error and its G (``g.grad``), measured per unit max|y|: the bound
    then covers T and every S column as in the docstring of :mod:`particles.summation`."""
    r = len(K)
    g.rho = max(1.0, xmax / ymax)
    g.freqs = [2 * np.pi * np.arange(-K[ax], K[ax] + 1) / P[ax] for ax in range(r)]
    g.grad = []
    for i, s in enumerate(sigmas):
        per_axis = g.coef[i][0]
        sums = np.array([float(np.sum(c)) for c in per_axis])
        tails = np.array([float(erfc(2 * np.pi * K[ax] * s / P[ax] / np.sqrt(2.0))) for ax in range(r)])
        val = alias + float(tails.max())  # one axis's value error
        gs, mus = [], []
        for ax in range(r):
            far = np.arange(K[ax] + 1, K[ax] + 2 + int(40 * P[ax] / (2 * np.pi * s)))
            fk = 2 * np.pi * far / P[ax]
            dtail = 2 * float(np.sum(fk * np.sqrt(2 * np.pi) * s / P[ax] * np.exp(-0.5 * (fk * s) ** 2)))
            d1 = delta / s * alias + dtail
            mus.append(d1 * (1 + val) ** (r - 1) + ((1 + val) ** (r - 1) - 1) / (s * np.sqrt(np.e)))
            gs.append(float(np.sum(np.abs(g.freqs[ax]) * per_axis[ax])) * float(np.prod(np.delete(sums, ax))))
        over = s**2 / ymax  # 1 / (|a| max|y|)
        g.model_err[i] = g.rho * g.model_err[i] + over * max(mus)
        g.grad.append((1.0 / s**2, over, g.rho * float(np.prod(sums)) + over * max(gs)))


def fine_grid(n_modes) -> int:
    return int(np.prod([2 * k for k in n_modes]))


def _kernel(g: Group, co) -> tuple[np.ndarray, bool]:
    """One head's coefficient array on the group's modes (-K..K per axis) and whether it reads the reversed
    modes (a reflected source -y_j has the modes of F at -k)."""
    if g.route == "circle":
        return co[0], False
    per_axis, flip = co
    prod = per_axis[0]
    for ax in range(1, len(per_axis)):
        prod = np.multiply.outer(prod, per_axis[ax])
    return prod, flip


def _reverse(F: np.ndarray) -> np.ndarray:
    """F at -k on every mode axis (the leading axis counts the transforms)."""
    return F[(slice(None),) + (slice(None, None, -1),) * (F.ndim - 1)]


def _column_modes(F: np.ndarray, d: int, ymax: float) -> list[np.ndarray]:
    """|modes| of each real column c, c y_1, .., c y_d packed in F (type-1 output of the complex strength
    vectors), the S columns divided by max |y|: a real column's modes are Hermitian, so the pair in one
    complex vector splits as (F(k) ± conj F(-k)) / 2."""
    Fr = np.conj(_reverse(F))
    cols = []
    for k in range(d + 1):
        v, imag = divmod(k, 2)
        part = (F[v] - Fr[v]) / 2j if imag else (F[v] + Fr[v]) / 2
        cols.append(np.abs(part) / (1.0 if k == 0 else ymax))
    return cols


@dataclass
class GroupRun:
    """The transforms of one group: T and S/T per head and the terms of its error bound."""

    T: list  # per head, (m,): the kernel sums T_i
    mean: list  # per head, (m, d): S_i / T_i (rows with T_i <= 0 fail the bound and are recomputed)
    mass: list  # per head: A_h, the ℓ¹ norm of its type-2 input per real column (S columns over max|y|)
    gsum: list  # per head: G_h = Σ_k |ĝ_k|, the ℓ¹ norm of its coefficients
    eps1: float  # tolerance of the type-1 transform
    eps2: float  # tolerance of the type-2 transform
    safety: float  # the library's constant C (routes.NUFFT_SAFETY)


def prior_gsum(g: Group) -> float:
    """The largest G_h of the group's heads before any transform (≤ 1 + aliasing without the S terms)."""
    return max(t[2] for t in g.grad) if g.grad else 1.0


def run_group(g: Group, Y: np.ndarray, eps1: float, eps2_for) -> GroupRun:
    """Run the group's transforms; the type-2 tolerance is ``eps2_for(mass, gsum, safety)``, chosen once the
    type-1 modes (so each head's A_h) are known."""
    if g.grad is not None:
        return _run_scalar(g, eps1, eps2_for)
    d = Y.shape[1]
    strengths = _pack(g.c, Y)
    nv = strengths.shape[0]
    transforms = Transforms(g.src, g.tgt, g.n_modes, eps1, same=g.same)
    F = transforms.type1(strengths)
    ymax = float(np.sqrt(np.max(np.einsum("ij,ij->i", Y, Y)))) if Y.size else 0.0
    cols = _column_modes(F, d, ymax if ymax > 0 else 1.0)
    stack, mass, gsum = [], [], []
    for co in g.coef:
        kern, flip = _kernel(g, co)
        stack.append((_reverse(F) if flip else F) * kern[None])
        # |modes| at -k equal those at k for a real column, so a flip does not change the mass
        absk = np.abs(kern)
        mass.append(max(float(np.vdot(absk, c)) for c in cols))
        gsum.append(float(absk.sum()))
    eps2 = max(eps1, eps2_for(mass, gsum, transforms.safety))
    out = transforms.type2(np.concatenate(stack), eps2)
    TS = [_unpack(out[i * nv:(i + 1) * nv], d) for i in range(len(g.heads))]
    with np.errstate(divide="ignore", invalid="ignore"):
        means = [ts[:, 1:] / ts[:, :1] for ts in TS]
    return GroupRun([ts[:, 0] for ts in TS], means, mass, gsum, eps1, eps2, transforms.safety)


def _run_scalar(g: Group, eps1: float, eps2_for) -> GroupRun:
    """The scalar route: one real type-1 column (the weights); per head the type-2 transforms of T's modes
    and of its gradient's (i k a_k, Hermitian too: real outputs, packed in pairs), then S = ±(xT + ∇T/|a|)
    (:func:`_gradient_terms`). A_h and G_h add the gradient's terms the same way as the model error."""
    transforms = Transforms(g.src, g.tgt, g.n_modes, eps1, same=g.same)
    F = transforms.type1(g.c.astype(complex)[None])
    absF = np.abs(F[0])
    r = absF.ndim
    freq = [f.reshape([-1 if ax == b else 1 for ax in range(r)]) for b, f in enumerate(g.freqs)]
    stack, mass, gsum = [], [], []
    for co, (_, over, G) in zip(g.coef, g.grad):
        kern, flip = _kernel(g, co)
        modes = (_reverse(F) if flip else F)[0] * kern
        cols = [modes] + [1j * f * modes for f in freq]
        stack += [cols[v] + 1j * cols[v + 1] if v + 1 < len(cols) else cols[v] for v in range(0, len(cols), 2)]
        absk = np.abs(kern)
        grad = max(float(np.vdot(np.abs(f) * absk, absF)) for f in freq)
        mass.append(g.rho * float(np.vdot(absk, absF)) + over * grad)
        gsum.append(G)
    eps2 = max(eps1, eps2_for(mass, gsum, transforms.safety))
    out = transforms.type2(np.stack(stack), eps2)
    nv = (r + 2) // 2
    Ts, means = [], []
    for i, (co, (a_abs, _, _)) in enumerate(zip(g.coef, g.grad)):
        # T, ∂_1 T, .., ∂_r T: the real and imaginary parts of the head's nv outputs; the mean S/T is
        # ±(x + ∇T/(|a| T)), written column by column (no (m, r+1) gather)
        parts = out[i * nv:(i + 1) * nv].view(float).reshape(nv, -1, 2)
        T = np.ascontiguousarray(parts[0, :, 0])
        sign = -1.0 if co[1] else 1.0
        mean = np.empty((T.size, r))
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.divide(sign / a_abs, T)
            for b in range(r):
                np.multiply(parts[(b + 1) // 2, :, (b + 1) % 2], q, out=mean[:, b])
            (np.subtract if sign < 0 else np.add)(mean, g.points, out=mean)
        Ts.append(T)
        means.append(mean)
    return GroupRun(Ts, means, mass, gsum, eps1, eps2, transforms.safety)
