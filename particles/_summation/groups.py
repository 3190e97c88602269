"""Transform groups: heads evaluated through one type-1 and one batched type-2 NUFFT.

Contract: :func:`build_groups` turns the routes of the heads into :class:`Group` objects (points
scaled into the periodic box, per-head Fourier coefficients, the truncation + aliasing error
per unit ‖c‖₁ of each head); :func:`run_group` returns the real columns [T, S] per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ive

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
        g.model_err[0] += float(np.expm1(i.dropped * max_norm(targets) * max_norm(sources)))
        groups.append(g)
    return groups


def max_norm(X):
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X))))


def _gauss_group(heads, route, tgt, src, c, sigmas, flips, offsets, tol_model, r, centre, extent=None):
    """A periodised Gauss transform for heads of widths ``sigmas`` sharing points and strengths."""
    if extent is None:
        # scalar heads on the sphere: every point and its reflection lie in [-1, 1]^r
        extent = np.full(r, 2.0)
    smax = max(sigmas)
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
    t_pts = (tgt - centre) * scale
    s_pts = t_pts if tgt is src else (src - centre) * scale
    return Group(list(heads), route, s_pts, t_pts, c, list(offsets), coefs, tuple(int(2 * k + 1) for k in K), errs,
                 same=tgt is src)


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
    """The transforms of one group: [T, S] (m, d+1) per head and the terms of its error bound."""

    TS: list
    mass: list  # per head: A_h, the ℓ¹ norm of its type-2 input per real column (S columns over max|y|)
    gsum: list  # per head: G_h = Σ_k |ĝ_k|, the ℓ¹ norm of its coefficients
    eps1: float  # tolerance of the type-1 transform
    eps2: float  # tolerance of the type-2 transform
    safety: float  # the library's constant C (routes.NUFFT_SAFETY)


def run_group(g: Group, Y: np.ndarray, eps1: float, eps2_for) -> GroupRun:
    """Run the group's transforms; the type-2 tolerance is ``eps2_for(mass, gsum, safety)``, chosen once the
    type-1 modes (so each head's A_h) are known."""
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
    return GroupRun([_unpack(out[i * nv:(i + 1) * nv], d) for i in range(len(g.heads))], mass, gsum, eps1, eps2,
                    transforms.safety)
