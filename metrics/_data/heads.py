r"""The geometry of trained heads against the paper's hypotheses, as an ``xr.Dataset``.

:func:`head_geometry` takes the attention sublayers of a model
(:class:`particles.AttentionWeights`, e.g. from :func:`particles.load_attention_layers`) and
measures, with :math:`M_h = W_{Q,h}^\top W_{K,h}/\sqrt{d_{head}}` and :math:`W_h = W_{O,h}W_{V,h}`:

- ``score_angle`` (layer, pair, angle): the principal angles between the score subspaces
  :math:`\operatorname{range} M_h` and :math:`\operatorname{range} M_k` of every head pair
  (``key_angle``: between the key subspaces :math:`\operatorname{range} M_h^\top`;
  ``value_angle``: between the value subspaces :math:`\operatorname{range} W_h`), degrees,
  computed as :math:`\arctan2(\sigma_{\sin}, \sigma_{\cos})` (accurate at every angle). The
  paper motivates Theorem 39 with trained heads whose angles are "typically 70-85 degrees".
  Since :math:`M_h^\top M_k = 0` iff :math:`\operatorname{range}M_h \perp \operatorname{range}M_k`,
  these angles are what decides the orthogonality defect below.
- ``cross_norm`` (layer, pair) :math:`\|M_h^\top M_k\|_{op}`, against ``self_norm`` (layer, head)
  :math:`\|M_h^\top M_h\|_{op} = \|M_h\|_{op}^2`; ``cross_ratio`` =
  :math:`\|M_h^\top M_k\|_{op}/(\|M_h\|_{op}\|M_k\|_{op}) \in [0, 1]` (0: orthogonal heads,
  Theorems 16-17; 1: a shared direction), and per layer ``orthogonality_defect``
  :math:`\delta = \max_{h\ne k}\|M_h^\top M_k\|_{op}` of Theorems 39-40, whose cross terms
  :math:`|\langle f^h_i, f^k_i\rangle| \le \delta S^h_i S^k_i` must stay below the heads' own
  (self-energy) terms; ``self_energy_ratio`` (layer, head) :math:`\max_{k\ne h}\|M_h^\top
  M_k\|_{op}/\|M_h^\top M_h\|_{op}` is that comparison at the level of the matrices (< 1: the
  head's self-coupling dominates every cross-coupling).
- ``symmetry_defect`` (layer, head) :math:`\|M_h - M_h^\top\|_F/\|M_h\|_F` (Condition 3;
  :math:`\sqrt2` for a random matrix, 0 for a symmetric one, 2 for a skew one).
- ``value_misalignment`` (layer, head) :math:`\|W_h - M_h\|_F/\|M_h\|_F` (Theorem 12's
  :math:`\Delta_h = W_h - M_h`, at the scale β = 1 of the loader), ``delta_op``
  :math:`\|\Delta_h\|_{op}`, and the scale-free ``value_alignment_cosine``
  :math:`\langle W_h, M_h\rangle_F/(\|W_h\|_F\|M_h\|_F)` (Condition 4 up to a positive scale
  iff it is 1; then :math:`\min_c\|W_h - cM_h\|_F/\|W_h\|_F = \sqrt{1-\cos^2}`).
- ``eigenvalue_real``/``eigenvalue_imag``/``singular_value`` (layer, head, eig): the
  :math:`d_{head}` non-zero eigenvalues (by decreasing modulus) and singular values of
  :math:`M_h` (the other :math:`d - d_{head}` are 0); ``isotropic_strength``
  :math:`\alpha_h = \operatorname{tr}M_h/d` and ``scalar_defect``
  :math:`\|M_h - \alpha_h I\|_F/\|M_h\|_F`.
- ``beta_star`` (layer): Theorem 19's closed form :math:`\beta^*(H, n, \alpha)` where its
  assumptions hold (equal scalar heads :math:`M_h = W_h = \alpha I`, to ``tol``), else NaN, with
  ``beta_star_reason`` saying which failed and by how much; ``beta_star_isotropic`` applies the
  formula to the mean :math:`\alpha` of the heads (a reference number, not a theorem, NaN if
  :math:`\alpha \le 0`).

Everything is computed from the :math:`d \times d_{head}` factors (QR, then
:math:`d_{head}`-sized SVDs): O(L H² d d_head²) time, no :math:`d \times d` matrix is formed.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from particles import AttentionWeights, __version__, theory
from particles.validation import (
    NONE,
    AnyOf,
    Checked,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    check_param,
    declare,
)

from .dataset import KIND_ATTR
from .fidelity import network_fidelity, sentence_points
from .provenance import netcdf_safe, provenance

__all__ = ["head_geometry", "LAYERS"]


def _factors(w: AttentionWeights):
    """Per head, M_h = A_h B_h^T and W_h = P_h R_h^T with (d, d_head) factors."""
    s = 1.0 / np.sqrt(w.d_head)
    A = w.Wq.transpose(0, 2, 1) * s
    B = w.Wk.transpose(0, 2, 1)
    P = w.Wo
    R = w.Wv.transpose(0, 2, 1)
    return A, B, P, R


def _range_basis(A, B, tol):
    """Orthonormal bases of range(A_h B_h^T) (H, d, d_head; columns past the rank are 0), the
    singular values, and the rank of every head."""
    Qa, Ra = np.linalg.qr(A)
    Qb, Rb = np.linalg.qr(B)
    U, S, _ = np.linalg.svd(Ra @ Rb.transpose(0, 2, 1))
    rank = (S > tol * S[:, :1]).sum(axis=1)
    basis = Qa @ U
    mask = np.arange(S.shape[1])[None, :] < rank[:, None]
    return basis * mask[:, None, :], S, rank


def _principal_angles(U, V, r_u, r_v, size):
    """Angles (degrees, ascending) between span U[:, :r_u] and span V[:, :r_v], NaN-padded to ``size``."""
    out = np.full(size, np.nan)
    k = min(r_u, r_v, size)
    if k == 0:
        return out
    U, V = (U[:, :r_u], V[:, :r_v]) if r_u >= r_v else (V[:, :r_v], U[:, :r_u])
    C = U.T @ V
    cos = np.linalg.svd(C, compute_uv=False)[:k]
    sin = np.linalg.svd(V - U @ C, compute_uv=False)[::-1][:k]  # ascending, to match cos descending
    out[:k] = np.degrees(np.arctan2(sin, cos))
    return out


def _layer(w: AttentionWeights, tol: float, n_tokens: int) -> dict:
    A, B, P, R = _factors(w)
    H, d, dh = w.n_heads, w.d, w.d_head
    Us, S, rank = _range_basis(A, B, tol)
    Ks, _, krank = _range_basis(B, A, tol)
    Vs, _, vrank = _range_basis(P, R, tol)
    pairs = [(h, k) for h in range(H) for k in range(h + 1, H)]
    out = {name: np.full((len(pairs), dh), np.nan) for name in ("score_angle", "key_angle", "value_angle")}
    for p, (h, k) in enumerate(pairs):
        out["score_angle"][p] = _principal_angles(Us[h], Us[k], rank[h], rank[k], dh)
        out["key_angle"][p] = _principal_angles(Ks[h], Ks[k], krank[h], krank[k], dh)
        out["value_angle"][p] = _principal_angles(Vs[h], Vs[k], vrank[h], vrank[k], dh)
    # ||M_h^T M_k|| = ||B_h (A_h^T A_k) B_k^T|| = ||Rb_h (A_h^T A_k) Rb_k^T|| (Qb orthonormal)
    Rb = np.linalg.qr(B)[1]
    AtA = np.matmul(A.transpose(0, 2, 1)[:, None], A[None])
    G = np.matmul(np.matmul(Rb[:, None], AtA), Rb.transpose(0, 2, 1)[None])
    cross_all = np.linalg.norm(G, 2, axis=(-2, -1))
    opM = S[:, 0]
    out["self_norm"] = np.diagonal(cross_all).copy()
    out["cross_norm"] = np.array([cross_all[h, k] for h, k in pairs])
    out["cross_ratio"] = np.array([cross_all[h, k] / (opM[h] * opM[k]) for h, k in pairs])
    off = cross_all + np.diag(np.full(H, -np.inf))
    out["self_energy_ratio"] = off.max(axis=1) / out["self_norm"] if H > 1 else np.zeros(H)
    out["orthogonality_defect"] = float(off.max()) if H > 1 else 0.0
    # Frobenius inner products through d_head-sized products: <X Y^T, Z T^T> = tr((Y^T T)(Z^T X)) ...
    BtA = np.einsum("hdi,hdj->hij", B, A)
    M2 = np.einsum("hij,hjk->hik", BtA, BtA)  # B^T A B^T A: tr M^2 = tr (B^T A)^2
    normM2 = (S * S).sum(axis=1)
    trMM = np.trace(M2, axis1=1, axis2=2)
    out["symmetry_defect"] = np.sqrt(np.maximum(2 * normM2 - 2 * trMM, 0.0) / normM2)
    inner = np.einsum("hij,hji->h", np.einsum("hdi,hdj->hij", R, B), np.einsum("hdi,hdj->hij", A, P))  # <W, M>_F
    normW2 = np.einsum("hij,hij->h", np.einsum("hdi,hdj->hij", P, P), np.einsum("hdi,hdj->hij", R, R))
    out["value_misalignment"] = np.sqrt(np.maximum(normW2 + normM2 - 2 * inner, 0.0) / normM2)
    out["value_alignment_cosine"] = inner / np.sqrt(normW2 * normM2)
    Rd = np.linalg.qr(np.concatenate([P, -A], axis=2))[1]
    Rr = np.linalg.qr(np.concatenate([R, B], axis=2))[1]
    out["delta_op"] = np.linalg.norm(Rd @ Rr.transpose(0, 2, 1), 2, axis=(-2, -1))
    ev = np.linalg.eigvals(BtA)  # the non-zero eigenvalues of A B^T are those of B^T A
    ev = np.take_along_axis(ev, np.argsort(-np.abs(ev), axis=1, kind="stable"), axis=1)
    out["eigenvalue_real"], out["eigenvalue_imag"], out["singular_value"] = ev.real, ev.imag, S
    alpha = np.trace(BtA, axis1=1, axis2=2) / d
    out["isotropic_strength"] = alpha
    out["scalar_defect"] = np.sqrt(np.maximum(normM2 - d * alpha**2, 0.0) / normM2)  # ||M - aI||^2 = ||M||^2 - d a^2
    out["_zero"] = (normM2 == 0) | (normW2 == 0)
    return out


#: the absolute variables and their power of the layer's weight scale s (M_h and W_h scale as s^2)
_SCALED = {"singular_value": 2, "eigenvalue_real": 2, "eigenvalue_imag": 2, "isotropic_strength": 2, "delta_op": 2,
           "self_norm": 4, "cross_norm": 4, "orthogonality_defect": 4}


def _layer_scale_free(w: AttentionWeights, tol: float, n_tokens: int) -> dict:
    """:func:`_layer` on the weights divided by their largest entry s (so products neither
    underflow nor overflow: the ratios are exact at any scale), the absolute variables then
    multiplied back by their power of s; a zero head or a norm beyond float64 is refused."""
    s = max(float(np.abs(getattr(w, f)).max()) for f in ("Wq", "Wk", "Wv", "Wo"))
    if s == 0.0:
        s = 1.0  # an all-zero layer: the zero heads are named below
    unit = dataclasses.replace(w, Wq=w.Wq / s, Wk=w.Wk / s, Wv=w.Wv / s, Wo=w.Wo / s)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero head's 0/0 is refused just below
        out = _layer(unit, tol, n_tokens)
    zero = np.flatnonzero(out.pop("_zero"))
    pruned = [int(h) for h in zero if any(not getattr(w, f)[h].any() for f in ("Wq", "Wk", "Wv", "Wo"))]
    if pruned:
        raise InvalidParameterError(
            f"The 'layers' parameter of head_geometry: layer {w.layer} has zero (pruned) heads {pruned} (a zero "
            "score matrix M_h or value matrix W_h), whose angles and ratios are undefined. Drop those heads from "
            "every field of the layer (Wq, Wk, Wv, Wo and the biases bq, bk, bv) and call again.")
    if zero.size:  # no field is zero: M_h or W_h underflows beside the other, the largest entry of the layer
        qk, vo = (max(float(np.abs(getattr(w, f)).max()) for f in pair) for pair in (("Wq", "Wk"), ("Wv", "Wo")))
        raise InvalidParameterError(
            f"The 'layers' parameter of head_geometry: in layer {w.layer}, Wq and Wk reach {qk:.3g} while Wv and Wo "
            f"reach {vo:.3g}: heads {zero.tolist()} are tiny, not zero, but their score matrix M_h or value matrix "
            "W_h is beyond float64 beside the other (value_misalignment compares them). Check the export's scales, "
            "or scale Wq, Wk (or Wv, Wo) so that the two are within about 1e150 of each other, and call again.")
    with np.errstate(over="ignore", under="ignore"):
        for name, power in _SCALED.items():
            out[name] = out[name] * s**(power // 2) * s**(power - power // 2)
            if not np.all(np.isfinite(out[name])):
                raise InvalidParameterError(
                    f"The 'layers' parameter of head_geometry: layer {w.layer}'s weights reach {s:.3g}, so its "
                    f"{name} exceeds float64 (about 1.8e308). Divide the weights by a power of two (every ratio "
                    "of the report is scale-free) and call again.")
    alpha = out["isotropic_strength"]
    H = w.n_heads
    out["beta_star"], out["beta_star_reason"] = _beta_star(out, alpha, H, n_tokens, tol)
    mean_alpha = float(alpha.mean())
    out["beta_star_isotropic"] = theory.beta_star(H, n=n_tokens, alpha=mean_alpha) if mean_alpha > 0 else np.nan
    return out


def _beta_star(out, alpha, H, n, tol):
    """Theorem 19 needs equal scalar heads M_h = W_h = alpha I (C3, C4, scalar, equal alpha > 0)."""
    reasons = []
    worst = {"not scalar (max ||M_h - alpha_h I||_F/||M_h||_F)": out["scalar_defect"].max(),
             "not symmetric (max symmetry defect, Condition 3)": out["symmetry_defect"].max(),
             "not value-aligned (max ||W_h - M_h||_F/||M_h||_F, Condition 4)": out["value_misalignment"].max(),
             "unequal heads (spread of alpha_h / mean)": np.ptp(alpha) / max(abs(alpha.mean()), 1e-300)}
    reasons = [f"{k} = {v:.3g} > tol = {tol:g}" for k, v in worst.items() if not v <= tol]
    if alpha.mean() <= 0:
        reasons.append(f"mean alpha = {alpha.mean():.3g} <= 0")
    if reasons:
        return np.nan, "Theorem 19 assumptions fail: " + "; ".join(reasons) + "."
    return (theory.beta_star(H, n=n, alpha=float(alpha.mean())),
            "assumptions of Theorem 19 hold (orthogonal tokens assumed)")


_VARS = {  # name: (dims after layer, long_name, units)
    "score_angle": (("pair", "angle"), "principal angle between score subspaces range(M_h), range(M_k)", "degree"),
    "key_angle": (("pair", "angle"), "principal angle between key subspaces range(M_h^T), range(M_k^T)", "degree"),
    "value_angle": (("pair", "angle"), "principal angle between value subspaces range(W_h), range(W_k)", "degree"),
    "cross_norm": (("pair",), "cross coupling ||M_h^T M_k||_op", "1"),
    "cross_ratio": (("pair",), "||M_h^T M_k||_op / (||M_h||_op ||M_k||_op)", "1"),
    "self_norm": (("head",), "self coupling ||M_h^T M_h||_op", "1"),
    "self_energy_ratio": (("head",), "max_k ||M_h^T M_k||_op / ||M_h^T M_h||_op", "1"),
    "orthogonality_defect": ((), "delta = max_{h != k} ||M_h^T M_k||_op (Theorems 39-40)", "1"),
    "symmetry_defect": (("head",), "||M_h - M_h^T||_F / ||M_h||_F (Condition 3)", "1"),
    "value_misalignment": (("head",), "||W_h - M_h||_F / ||M_h||_F (Theorem 12)", "1"),
    "value_alignment_cosine": (("head",), "<W_h, M_h>_F / (||W_h||_F ||M_h||_F)", "1"),
    "delta_op": (("head",), "||W_h - M_h||_op (Theorem 12's ||Delta_h||_op)", "1"),
    "eigenvalue_real": (("head", "eig"), "real part of a non-zero eigenvalue of M_h", "1"),
    "eigenvalue_imag": (("head", "eig"), "imaginary part of a non-zero eigenvalue of M_h", "1"),
    "singular_value": (("head", "eig"), "singular value of M_h", "1"),
    "isotropic_strength": (("head",), "alpha_h = tr(M_h) / d", "1"),
    "scalar_defect": (("head",), "||M_h - alpha_h I||_F / ||M_h||_F", "1"),
    "beta_star": ((), "Theorem 19 critical inverse temperature (NaN where its assumptions fail)", "1"),
    "beta_star_reason": ((), "why beta_star is or is not available", ""),
    "beta_star_isotropic": ((), "Theorem 19 formula at the mean alpha_h (reference only)", "1"),
}


def _attention_layers(value, name, caller):
    """An AttentionWeights (as it is) or a non-empty sequence of them (as a list) of one width d."""
    if isinstance(value, AttentionWeights):
        return value
    layers = list(value) if isinstance(value, (list, tuple)) else []
    if not layers or not all(isinstance(w, AttentionWeights) for w in layers):
        raise InvalidParameterError(
            f"The {name!r} parameter must be an AttentionWeights or a non-empty list of them "
            f"(particles.load_attention_layers(...)); got {type(value).__name__}.")
    widths = sorted({w.d for w in layers})
    if len(widths) > 1:
        raise InvalidParameterError(f"The {name!r} parameter must hold layers of one width d; got the "
                                    f"widths {widths}.")
    return layers


#: the attention sublayers of one model (head_geometry, sentence_flow)
LAYERS = Checked(_attention_layers, "an AttentionWeights or a non-empty list of them",
                 [None, 3, "layers", [], [None], np.eye(3)])


#: the title of a dataset (head_geometry, sentence_flow): a string, as trajectory_to_dataset records it
TITLE = Instance(str, what="a title (str)")


@declare(layers=LAYERS, n_tokens=Integer(2), tol=Interval(0, 1, closed="neither"), title=TITLE,
         attrs=AnyOf(NONE, Instance(dict, what="a dict")))
def head_geometry(layers, *, n_tokens: int = 32, tol: float = 1e-8, title: str = "headflow head geometry",
                  attrs: dict | None = None, sentence=None) -> xr.Dataset:
    r"""The head-geometry report of the module docstring.

    Parameters
    ----------
    layers : AttentionWeights or sequence of AttentionWeights
        One model's attention sublayers (same H, d, d_head).
    n_tokens : int >= 2
        The n of Theorem 19's :math:`\beta^*` (orthogonal tokens need n <= d).
    tol : float in (0, 1)
        Relative tolerance: ranks (singular values below ``tol`` times the largest are 0) and
        the assumptions of Theorem 19.
    title : str
    attrs : dict, optional
        Extra Dataset attrs (netCDF-safe).
    sentence : ndarray of shape (n, d), unit rows, optional
        Tokens (e.g. ``particles.norm_sphere(bert_embeddings(...))``) on which every layer's sphere
        model (β = d) and exact flat model are compared with the layer's attention output:
        ``network_cosine`` and ``network_norm_ratio`` (layer, bias) of :mod:`metrics._data.fidelity`.

    Returns
    -------
    xr.Dataset
        Dims ``layer``, ``head``, ``pair`` (coords ``head_a`` < ``head_b``), ``angle``, ``eig``.

    Examples
    --------
    >>> import particles
    >>> rng = np.random.default_rng(0)
    >>> w = particles.AttentionWeights(*rng.standard_normal((3, 3, 2, 8)), Wo=rng.standard_normal((3, 8, 2)))
    >>> ds = head_geometry(w)
    >>> ds.score_angle.dims, ds.sizes["pair"]
    (('layer', 'pair', 'angle'), 3)
    """
    caller = "head_geometry"
    layers = [layers] if isinstance(layers, AttentionWeights) else layers
    shape = (layers[0].n_heads, layers[0].d_head, layers[0].d)
    for i, w in enumerate(layers):
        if (w.n_heads, w.d_head, w.d) != shape:
            raise InvalidParameterError(f"layers of {caller} must share (n_heads, d_head, d) = {shape}; layer {i} "
                                        f"has {(w.n_heads, w.d_head, w.d)}.")
    n_tokens = check_param(n_tokens, "n_tokens", caller, low=2, integer=True)
    tol = check_param(tol, "tol", caller, low=0.0, high=1.0, low_open=True, high_open=True)
    # hundreds of LAPACK calls on d_head-sized matrices: threads only add contention (measured on
    # 2 shared cores: 109 s with OpenBLAS threads, under 2 s with one)
    with threadpool_limits(limits=1, user_api="blas"):
        per = [_layer_scale_free(w, tol, n_tokens) for w in layers]
    H, dh, d = shape
    pairs = [(h, k) for h in range(H) for k in range(h + 1, H)]
    data = {}
    for name, (dims, long_name, units) in _VARS.items():
        arr = np.array([p[name] for p in per])
        data[name] = (("layer",) + dims, arr, {"long_name": long_name, "units": units})
    coords = {
        "layer": ("layer", np.array([w.layer for w in layers]), {"long_name": "layer index", "units": "1"}),
        "head": ("head", np.arange(H), {"long_name": "attention head index", "units": "1"}),
        "pair": ("pair", np.arange(len(pairs)), {"long_name": "head pair index", "units": "1"}),
        "head_a": ("pair", np.array([p[0] for p in pairs], dtype=np.int64), {"long_name": "first head", "units": "1"}),
        "head_b": ("pair", np.array([p[1] for p in pairs], dtype=np.int64), {"long_name": "second head", "units": "1"}),
        "angle": ("angle", np.arange(dh), {"long_name": "principal angle index (ascending angles)", "units": "1"}),
        "eig": ("eig", np.arange(dh), {"long_name": "eigenvalue index (decreasing modulus)", "units": "1"}),
    }
    config = {"n_tokens": n_tokens, "tol": tol, "n_heads": H, "d_head": dh, "d": d,
              "architecture": layers[0].architecture, "norm": layers[0].norm, "n_layers": len(layers)}
    ds = xr.Dataset(data, coords=coords)
    if sentence is not None:
        u = sentence_points(sentence, d, caller, "sentence")
        ds = ds.merge(network_fidelity(layers, [u] * len(layers), float(d)).assign_coords(layer=ds.layer))
    ds.attrs = netcdf_safe({
        "title": title, "source": f"headflow {__version__}", KIND_ATTR: "head_geometry",
        "history": f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} created by headflow",
        **provenance(config=config), **config,
        "scale": "M_h = W_Q,h^T W_K,h / sqrt(d_head), W_h = W_O,h W_V,h (beta = 1 on the layer's own tokens)",
        **(attrs or {})})
    return ds
