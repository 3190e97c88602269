r"""How far the sphere model of a trained layer is from the layer itself, on a sentence.

For layer k and tokens :math:`u_i` on :math:`S^{d-1}` (the tokens of the flow at the start of the
layer), the attention sublayer reads :math:`a_i = \sqrt d\,u_i` (the LayerNorm's core; its γ and β
folded into the weights by ``load_attention(..., fold_norm=True)``) and outputs

.. math:: N_i = \sum_h W_{O,h}\sum_j \operatorname{softmax}_j\Big(\frac{(W_{Q,h}a_i + b_{Q,h})\cdot
   (W_{K,h}a_j + b_{K,h})}{\sqrt{d_{head}}}\Big)(W_{V,h}a_j + b_{V,h}) + b_O,

computed here from the projections themselves (not through a :class:`~particles.MultiHead`). Its
tangential part relative to the token's norm, :math:`P_{u_i}N_i/\sqrt d`, is what moves the token
on the sphere. The model of each bias treatment of :meth:`particles.AttentionWeights.to_multihead`
gives a velocity :math:`V_i` on the same tokens: ``"drop"`` the sphere model at β = d
(:math:`P_{u_i}\sum_h W_h\sum_j\operatorname{softmax}(d\langle u_i, M_hu_j\rangle)u_j`, biases lost),
``"augment"`` the exact flat model on :math:`(a_i, 1)` (first d coordinates, projected, over
:math:`\sqrt d`). Reported per layer and treatment over the whole sentence:
``network_cosine`` :math:`\langle V, P N/\sqrt d\rangle_F/(\|V\|_F\|PN/\sqrt d\|_F)` and
``network_norm_ratio`` :math:`\|V\|_F/\|PN/\sqrt d\|_F` (1 and 1: the model is the layer).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles.extend import BIAS_MODES
from particles.validation import InvalidParameterError, check_points

__all__ = ["attention_output", "network_fidelity", "sentence_points", "FIDELITY_VARIABLES"]

#: the variables of :func:`network_fidelity`: long name
FIDELITY_VARIABLES = {
    "network_cosine": "cosine between the model's velocity and the layer's projected attention output",
    "network_norm_ratio": "norm of the model's velocity over the layer's projected attention output",
}


def attention_output(w, a: np.ndarray) -> np.ndarray:
    """The attention sublayer's output (n, d) on its input tokens a (n, d), biases and causal mask
    included (module docstring)."""
    def proj(P, b):
        out = np.einsum("hed,nd->hne", P, a)
        return out if b is None else out + b[:, None, :]

    q, k, v = proj(w.Wq, w.bq), proj(w.Wk, w.bk), proj(w.Wv, w.bv)
    logits = q @ k.transpose(0, 2, 1) / np.sqrt(w.d_head)
    if w.causal:
        logits = np.where(np.tri(len(a), dtype=bool)[None], logits, -np.inf)
    p = np.exp(logits - logits.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    out = np.einsum("hde,hne->nd", w.Wo, p @ v)
    return out if w.bo is None else out + w.bo


def _tangent(u, v):
    return v - np.sum(u * v, axis=1, keepdims=True) * u


def _velocities(w, u, beta):
    """The model velocity of each bias treatment on the tokens u, and the layer's projected output."""
    d = u.shape[1]
    a = np.sqrt(d) * u
    network = _tangent(u, attention_output(w, a)) / np.sqrt(d)
    drop = w.to_multihead(beta=beta, kind="softmax", summation="exact").velocity(u)
    flat = w.to_multihead(bias="augment", geometry="flat", beta=1.0, kind="softmax", summation="exact")
    augment = _tangent(u, flat.velocity(np.hstack([a, np.ones((len(a), 1))]))[:, :d]) / np.sqrt(d)
    return {"drop": drop, "augment": augment}, network


def network_fidelity(layers, states, beta: float) -> xr.Dataset:
    """``network_cosine`` and ``network_norm_ratio`` (layer, bias) of the layers on the tokens
    ``states[k]`` (unit rows) at the start of each layer (module docstring)."""
    cos = np.full((len(layers), len(BIAS_MODES)), np.nan)
    ratio = np.full_like(cos, np.nan)
    for k, (w, u) in enumerate(zip(layers, states)):
        models, network = _velocities(w, np.asarray(u, dtype=np.float64), beta)
        n_norm = np.linalg.norm(network)
        for b, mode in enumerate(BIAS_MODES):
            v = models[mode]
            v_norm = np.linalg.norm(v)
            ratio[k, b] = v_norm / n_norm if n_norm > 0 else np.nan
            cos[k, b] = float(np.sum(v * network) / (v_norm * n_norm)) if v_norm > 0 and n_norm > 0 else np.nan
    dims = ("layer", "bias")
    coords = {"layer": ("layer", np.array([w.layer for w in layers]), {"long_name": "layer index", "units": "1"}),
              "bias": ("bias", np.array(list(BIAS_MODES)), {"long_name": "bias treatment of the sphere model",
                                                             "units": ""})}
    return xr.Dataset({name: (dims, arr, {"long_name": FIDELITY_VARIABLES[name], "units": "1"})
                       for name, arr in (("network_cosine", cos), ("network_norm_ratio", ratio))}, coords=coords)


def sentence_points(x, d: int, caller: str, name: str = "x0") -> np.ndarray:
    """The tokens of a sentence (``sentence_flow``'s x0, ``head_geometry``'s sentence): the shape
    first (the layers' width), then unit rows, whose documented source is
    :func:`particles.norm_sphere` (the embedding LayerNorm's core), not an L2 normalisation."""
    x = check_points(x, name, caller, on_sphere=False)
    if x.shape[1] != d:
        turned = f" (it looks transposed: pass {name}.T)" if x.shape[0] == d else ""
        raise InvalidParameterError(f"{name} of {caller} has d = {x.shape[1]} columns; the layers are {d}-dimensional"
                                    f"{turned}.")
    dev = float(np.max(np.abs(np.linalg.norm(x, axis=1) - 1.0)))
    if dev > 1e-10:
        raise InvalidParameterError(
            f"{name} of {caller} must lie on the unit sphere (max |‖x_i‖ − 1| = {dev:.1e}): pass "
            "particles.norm_sphere(embeddings), the embedding LayerNorm's core that layer 0 expects "
            "(its gamma and beta are folded into the layer), not an L2 normalisation."
        )
    return x
