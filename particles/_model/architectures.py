r"""Attention tensors of trained models, by architecture, as :class:`~particles.AttentionWeights`.

:func:`load_attention` reads one layer (:func:`load_attention_layers`: all of them) from a
safetensors file, its bytes, or a dict of numpy arrays, in one of the namings of
:data:`ARCHITECTURES` (detected from the tensor names unless given; any prefix such as
``bert.``, ``transformer.`` or ``model.`` is allowed):

- ``"bert"``: ``encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}`` and
  ``encoder.layer.{i}.attention.output.dense.{weight,bias}`` (``nn.Linear``: weight of shape
  (out, in), :math:`y = xW^\top + b`); the norm in front of layer i is the post-LN of layer
  i−1 (``encoder.layer.{i-1}.output.LayerNorm``), of the embeddings for i = 0.
- ``"gpt2"``: ``h.{i}.attn.c_attn.{weight,bias}`` (fused q, k, v) and ``h.{i}.attn.c_proj``:
  ``Conv1D`` weights of shape (in, out), :math:`y = xW + b`, i.e. transposed; norm ``h.{i}.ln_1``;
  causal.
- ``"llama"``: ``layers.{i}.self_attn.{q,k,v,o}_proj.weight`` (biases optional), grouped-query
  heads: k and v have :math:`H_{kv}` heads, head h reads group :math:`\lfloor h H_{kv}/H\rfloor`;
  RMSNorm ``layers.{i}.input_layernorm``; causal. The rotary position embedding (RoPE) rotates
  q and k by their positions and is not a fixed bilinear form: it is **not** represented (the
  heads are the layer's at equal positions, where RoPE is the identity).

The number of heads is not stored in the tensors: pass ``n_heads`` (the model's config). The
safetensors files are read with numpy alone (bf16 and fp16 included); the tokenizer of
:mod:`metrics.sentences` needs the optional extra: ``pip install "headflow[trained]"``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._core.params import NONE, AnyOf, Boolean, Instance, Integer, Options
from .._core.params_data import Checked
from .._core.validation import check_param
from .model_config import check_config, check_layer_count, check_widths, config_heads
from .pretrained import AttentionWeights
from .tensorfile import parse_safetensors, read_file

__all__ = ["ARCHITECTURES", "Architecture", "read_tensors", "load_attention", "load_attention_layers",
           "detect_architecture", "require_extra"]

EXTRA = 'pip install "headflow[trained]"'


def require_extra(module: str):
    """Import an optional dependency of the ``trained`` extra, or raise an ImportError naming it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{module.split('.')[0]} is needed to read trained models but is not installed: {EXTRA} "
            "(the optional extra 'trained': safetensors and tokenizers)."
        ) from exc


def read_tensors(source) -> dict:
    """The tensors of ``source`` as a dict of numpy arrays (float32 stays float32 here, bf16
    becomes float32 exactly; :class:`AttentionWeights` converts to float64).

    ``source`` is a path to a ``.safetensors`` file, the bytes of one (read by
    :mod:`particles._model.tensorfile`, numpy alone: F64, F32, F16, BF16 and the integer types),
    or a mapping of names to arrays (returned as a dict, arrays untouched). A damaged file
    (empty, truncated, a header that is not JSON) is an :class:`InvalidParameterError` saying so.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_safetensors(bytes(source), "the bytes given")
    if isinstance(source, (str, os.PathLike)):
        if os.path.isdir(source):
            raise InvalidParameterError(f"source of read_tensors: {os.fspath(source)!r} is a folder; pass the "
                                        "path of the .safetensors file in it (e.g. model.safetensors).")
        if not os.path.isfile(source):
            raise InvalidParameterError(f"source of read_tensors: no file at {os.fspath(source)!r}; pass the path "
                                        "of a .safetensors file, its bytes, or a dict of numpy arrays.")
        return read_file(source)
    raise InvalidParameterError(f"source of read_tensors must be a path, bytes or a dict of numpy arrays; "
                                f"got {type(source).__name__}.")


@dataclass(frozen=True)
class Architecture:
    """A naming convention: ``marker`` (regex with the layer index as group 2 and any prefix as
    group 1) and ``split(get, prefix, layer, n_heads)`` returning the AttentionWeights fields."""

    marker: str
    split: object
    norm: object
    causal: bool


def _linear_heads(W, n_heads, name):
    """Rows of an (n_heads * d_head, d) Linear weight as (n_heads, d_head, d)."""
    rows, d = W.shape
    if rows % n_heads:
        raise InvalidParameterError(f"{name} has {rows} output rows, not divisible by n_heads = {n_heads}: "
                                    "pass the model's number of attention heads (its config's num_attention_heads).")
    return W.reshape(n_heads, rows // n_heads, d)


def _out_heads(Wo, n_heads, d_head, name):
    d, cols = Wo.shape
    if cols != n_heads * d_head:
        raise InvalidParameterError(f"{name} must have shape ({d}, {n_heads * d_head}) (n_heads * d_head columns); "
                                    f"got {Wo.shape}.")
    return Wo.reshape(d, n_heads, d_head).transpose(1, 0, 2)


def _bert(get, p, i, H):
    base = f"{p}encoder.layer.{i}.attention."
    W = {c: get(f"{base}self.{c}.weight", ndim=2) for c in ("query", "key", "value")}
    d = W["query"].shape[1]
    for c in ("key", "value"):
        get.shape(f"{base}self.{c}.weight", W[c], W["query"].shape)
    if d % H:
        raise InvalidParameterError(f"n_heads = {H} does not divide the width d = {d} of {base}self.query.weight; "
                                    "pass the model's num_attention_heads.")
    Wq, Wk, Wv = (_linear_heads(W[c], H, f"{base}self.{c}.weight") for c in ("query", "key", "value"))
    dh = Wq.shape[1]
    b = {c: get(f"{base}self.{c}.bias", shape=(d,), optional=True) for c in ("query", "key", "value")}
    out = {"Wq": Wq, "Wk": Wk, "Wv": Wv,
           "Wo": _out_heads(get(f"{base}output.dense.weight", shape=(d, d)), H, dh, f"{base}output.dense.weight"),
           "bo": get(f"{base}output.dense.bias", shape=(d,), optional=True)}
    for c, k in (("query", "bq"), ("key", "bk"), ("value", "bv")):
        out[k] = None if b[c] is None else b[c].reshape(H, dh)
    return out


def _gpt2(get, p, i, H):
    base = f"{p}h.{i}.attn."
    Wc = get(f"{base}c_attn.weight", ndim=2)
    d = Wc.shape[0]
    get.shape(f"{base}c_attn.weight", Wc, (d, 3 * d))
    if d % H:
        raise InvalidParameterError(f"n_heads = {H} does not divide the width d = {d} of {base}c_attn.weight; "
                                    "pass the model's n_head.")
    dh = d // H
    # Conv1D stores (in, out): the Linear weight is the transpose
    Wq, Wk, Wv = (_linear_heads(Wc[:, k * d:(k + 1) * d].T, H, f"{base}c_attn.weight") for k in range(3))
    bc = get(f"{base}c_attn.bias", shape=(3 * d,), optional=True)
    out = {"Wq": Wq, "Wk": Wk, "Wv": Wv,
           "Wo": _out_heads(get(f"{base}c_proj.weight", shape=(d, d)).T, H, dh, f"{base}c_proj.weight"),
           "bo": get(f"{base}c_proj.bias", shape=(d,), optional=True)}
    for k, name in enumerate(("bq", "bk", "bv")):
        out[name] = None if bc is None else bc[k * d:(k + 1) * d].reshape(H, dh)
    return out


def _llama(get, p, i, H):
    base = f"{p}layers.{i}.self_attn."
    Wq = get(f"{base}q_proj.weight", ndim=2)
    rows, d = Wq.shape
    if rows % H:
        raise InvalidParameterError(f"n_heads = {H} does not divide the {rows} rows of {base}q_proj.weight "
                                    "(n_heads * head_dim); pass the model's num_attention_heads.")
    dh = rows // H
    Wk = get(f"{base}k_proj.weight", ndim=2)
    kv_rows = Wk.shape[0]
    if kv_rows == 0 or Wk.shape[1] != d or kv_rows % dh or H % (kv_rows // dh):
        raise InvalidParameterError(f"{base}k_proj.weight must have shape (n_kv_heads * {dh}, {d}) with n_kv_heads "
                                    f"dividing n_heads = {H}; got {Wk.shape}.")
    Hkv = kv_rows // dh
    Wv = get(f"{base}v_proj.weight", shape=(kv_rows, d))
    group = np.arange(H) * Hkv // H  # head h reads key/value group floor(h Hkv / H)
    out = {"Wq": Wq.reshape(H, dh, d), "Wk": Wk.reshape(Hkv, dh, d)[group], "Wv": Wv.reshape(Hkv, dh, d)[group],
           "Wo": _out_heads(get(f"{base}o_proj.weight", shape=(d, rows)), H, dh, f"{base}o_proj.weight"),
           "bo": get(f"{base}o_proj.bias", shape=(d,), optional=True)}
    for c, k, n in (("q", "bq", H), ("k", "bk", Hkv), ("v", "bv", Hkv)):
        bias = get(f"{base}{c}_proj.bias", shape=(n * dh,), optional=True)
        out[k] = None if bias is None else (bias.reshape(n, dh) if n == H else bias.reshape(n, dh)[group])
    return out


def _bert_norm(p, i):
    return (f"{p}embeddings.LayerNorm" if i == 0 else f"{p}encoder.layer.{i - 1}.output.LayerNorm"), "layernorm"


#: architecture name -> naming convention (module docstring)
ARCHITECTURES = {
    "bert": Architecture(r"^(.*?)encoder\.layer\.(\d+)\.attention\.self\.query\.weight$", _bert, _bert_norm, False),
    "gpt2": Architecture(r"^(.*?)h\.(\d+)\.attn\.c_attn\.weight$", _gpt2,
                         lambda p, i: (f"{p}h.{i}.ln_1", "layernorm"), True),
    "llama": Architecture(r"^(.*?)layers\.(\d+)\.self_attn\.q_proj\.weight$", _llama,
                          lambda p, i: (f"{p}layers.{i}.input_layernorm", "rmsnorm"), True),
}


def detect_architecture(tensors, architecture: str | None = None) -> tuple[str, str, int]:
    """(architecture, prefix, number of layers) of a dict of tensors; ``architecture`` forces one."""
    names = list(tensors)
    if architecture is not None and architecture not in ARCHITECTURES:
        raise InvalidParameterError(f"architecture must be one of {sorted(ARCHITECTURES)} or None (detect); "
                                    f"got {architecture!r}.")
    found = {arch: hits for arch in ([architecture] if architecture else ARCHITECTURES)
             if (hits := [m for m in map(re.compile(ARCHITECTURES[arch].marker).match, names) if m])}
    if len(found) > 1:
        # Picking one family would drop the other's layers without a word.
        seen = "; ".join(f"{a} ({len(h)} layer(s), e.g. {h[0].group(0)!r})" for a, h in found.items())
        raise InvalidParameterError(f"the tensors hold attention layers of several architectures: {seen}. Pass "
                                    f"architecture= one of {sorted(found)} to choose, or the tensors of one model.")
    for arch, hits in found.items():
        prefixes = {m.group(1) for m in hits}
        if len(prefixes) > 1:
            raise InvalidParameterError(f"the tensors hold several {arch} models (prefixes {sorted(prefixes)}); "
                                        "pass a dict holding one of them.")
        return arch, hits[0].group(1), 1 + max(int(m.group(2)) for m in hits)
    want = "" if architecture is None else f" in the {architecture!r} naming"
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    raise InvalidParameterError(
        f"unknown architecture: no attention tensors{want} among the {len(names)} tensors ({shown}). Known namings: "
        + "; ".join(f"{k}: {v.marker}" for k, v in ARCHITECTURES.items()) + ". Rename the tensors to one of these."
    )


class _Getter:
    """Fetch named tensors as float64 with errors that name the tensor, its shape and the fix."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __call__(self, name, *, ndim=None, shape=None, optional=False):
        if name not in self.tensors:
            if optional:
                return None
            near = [k for k in self.tensors if k.rsplit(".", 2)[0] == name.rsplit(".", 2)[0]][:6]
            raise InvalidParameterError(f"missing tensor {name!r} (tensors beside it: {near or 'none'}); the file is "
                                        "incomplete or in another naming: pass architecture=... to choose one.")
        arr = np.asarray(self.tensors[name])
        if not np.issubdtype(arr.dtype, np.floating):
            raise InvalidParameterError(f"tensor {name!r} must hold floating-point numbers; got dtype {arr.dtype}.")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError(
                f"tensor {name!r} holds {int(np.isnan(arr).sum())} NaN and {int(np.isinf(arr).sum())} inf entries: the "
                "file is damaged, or the model was saved after its training diverged. Use an intact copy of the "
                "checkpoint.")
        if ndim is not None and arr.ndim != ndim:
            raise InvalidParameterError(f"tensor {name!r} must be {ndim}-dimensional; got shape {arr.shape}.")
        if shape is not None:
            self.shape(name, arr, shape)
        return arr

    @staticmethod
    def shape(name, arr, shape):
        if arr.shape != tuple(shape):
            raise InvalidParameterError(
                f"tensor {name!r} has the wrong shape: expected {tuple(shape)}, got {arr.shape}.")


def _tensors(value, name, caller):
    """The tensors of a source (:func:`read_tensors`), its refusals re-worded to name the parameter."""
    try:
        return read_tensors(value)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"The {name!r} parameter is not usable: "
                                    f"{str(exc).removeprefix('source of read_tensors').lstrip(': ')}") from None


#: a model's tensors: a .safetensors path, its bytes, or a dict of arrays (read once, at the call)
SOURCE = Checked(_tensors, "the path of a .safetensors file, its bytes, or a dict of tensor name -> array",
                 [None, 3, 2.5, "absent.safetensors", b"", b"\x05" + bytes(7), ["a"]])
_ARCH = AnyOf(NONE, Options("bert", "gpt2", "llama"))
_HEADS = AnyOf(NONE, Integer(1, hint="Pass the model's number of attention heads (its config's num_attention_heads)."))
_CONFIG = AnyOf(NONE, Instance(Mapping, what="a model config (a dict, e.g. the config read by "
                                             "metrics.sentences.read_model_zip or json.load(config.json))"))
@declare(source=SOURCE, layer=Integer(0), n_heads=_HEADS, architecture=_ARCH, fold_norm=Boolean(), config=_CONFIG)
def load_attention(source, layer: int = 0, *, n_heads: int | None = None, architecture: str | None = None,
                   fold_norm: bool = False, config=None) -> AttentionWeights:
    r"""One attention sublayer of a trained model as :class:`~particles.AttentionWeights`.

    Parameters
    ----------
    source : path, bytes or dict of str to ndarray
        A safetensors file (:func:`read_tensors`).
    layer : int
        Layer index.
    n_heads : int, optional
        Attention heads (query heads, for grouped-query models); default the config's.
    architecture : {"bert", "gpt2", "llama"}, optional
        Detected from the names by default.
    fold_norm : bool
        Fold the norm in front of the attention into the projections
        (:meth:`~particles.AttentionWeights.fold_norm`; its tensors must be present).
    config : dict, optional
        The model's config (``num_attention_heads`` or ``n_head``): gives ``n_heads`` when it is not
        passed (and must agree with it when it is).

    Returns
    -------
    AttentionWeights
        float64 arrays.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t = {"h.0.attn.c_attn.weight": rng.standard_normal((8, 24)), "h.0.attn.c_proj.weight": np.eye(8)}
    >>> w = load_attention(t, n_heads=2)
    >>> w.architecture, w.n_heads, w.d_head, w.causal
    ('gpt2', 2, 4, True)
    """
    n_heads = config_heads(n_heads, config, "load_attention")
    tensors = read_tensors(source)
    arch, prefix, n_layers = detect_architecture(tensors, architecture)
    return _load(tensors, arch, prefix, n_layers, layer, n_heads, fold_norm, config)


@declare(source=SOURCE, n_heads=_HEADS, architecture=_ARCH, fold_norm=Boolean(), config=_CONFIG)
def load_attention_layers(source, *, n_heads: int | None = None, architecture: str | None = None,
                          fold_norm: bool = False, config=None) -> list[AttentionWeights]:
    """Every attention sublayer of a model, in order (:func:`load_attention`; ``n_heads`` or ``config``)."""
    caller = "load_attention_layers"
    n_heads = config_heads(n_heads, config, caller)
    tensors = read_tensors(source)
    arch, prefix, n_layers = detect_architecture(tensors, architecture)
    check_layer_count(config, n_layers, arch, prefix, caller)
    check_widths(tensors, arch, prefix, range(n_layers), caller)
    return [_load(tensors, arch, prefix, n_layers, i, n_heads, fold_norm, config, caller) for i in range(n_layers)]


def _load(tensors, arch, prefix, n_layers, layer, n_heads, fold_norm, config,
          caller="load_attention") -> AttentionWeights:
    layer = check_param(layer, "layer", caller, low=0, high=n_layers - 1, integer=True)
    n_heads = check_param(n_heads, "n_heads", caller, low=1, integer=True)
    if not isinstance(fold_norm, (bool, np.bool_)):
        raise InvalidParameterError(f"The 'fold_norm' parameter of {caller} must be True or False; got {fold_norm!r}.")
    check_widths(tensors, arch, prefix, (layer,), caller)
    check_config(config, tensors, arch, prefix, layer, n_heads, caller)
    spec = ARCHITECTURES[arch]
    get = _Getter(tensors)
    fields = spec.split(get, prefix, layer, n_heads)
    w = AttentionWeights(**fields, causal=spec.causal, architecture=arch, layer=layer)
    if fold_norm:
        name, kind = spec.norm(prefix, layer)
        if f"{name}.weight" not in tensors:
            raise InvalidParameterError(
                f"fold_norm=True of {caller} folds the norm in front of layer {layer}, tensor '{name}.weight', which "
                "the tensors lack (a file of the attention layers alone?). Pass fold_norm=False, or the whole "
                "checkpoint's tensors.")
        w = w.fold_norm(get(f"{name}.weight", shape=(w.d,)),
                        get(f"{name}.bias", shape=(w.d,), optional=kind == "rmsnorm"), kind=kind)
    return w
