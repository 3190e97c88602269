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

A layer's biases come as a set: all of its architecture's or none (Llama: none; its o_proj bias
is optional apart, Qwen2 has q, k and v biases alone); only the key bias may be missing alone, as
softmax ignores it. Each tensor is checked against the hidden size before tensors are compared with
each other, so a broken one is named itself (:mod:`particles._model.layouts`).

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
from .layouts import TensorGetter, split_bert, split_gpt2, split_llama
from .model_config import check_config, check_layer_count, check_widths, config_heads, heads_given
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
        bad = next((k for k in source if not isinstance(k, str)), None)
        if bad is not None:  # (a state_dict's keys are the tensors' names)
            raise InvalidParameterError(f"source of read_tensors: a dict of tensors is keyed by the tensors' names "
                                        f"(str, e.g. 'encoder.layer.0.attention.self.query.weight'); got the key "
                                        f"{bad!r} ({type(bad).__name__}).")
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


def _bert_norm(p, i):
    return (f"{p}embeddings.LayerNorm" if i == 0 else f"{p}encoder.layer.{i - 1}.output.LayerNorm"), "layernorm"


#: architecture name -> naming convention (module docstring)
ARCHITECTURES = {
    "bert": Architecture(r"^(.*?)encoder\.layer\.(\d+)\.attention\.self\.query\.weight$", split_bert,
                         _bert_norm, False),
    "gpt2": Architecture(r"^(.*?)h\.(\d+)\.attn\.c_attn\.weight$", split_gpt2,
                         lambda p, i: (f"{p}h.{i}.ln_1", "layernorm"), True),
    "llama": Architecture(r"^(.*?)layers\.(\d+)\.self_attn\.q_proj\.weight$", split_llama,
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
    if architecture is not None:  # the tensors of another known naming: say which, not "rename"
        other = [a for a in ARCHITECTURES if a != architecture and any(map(re.compile(ARCHITECTURES[a].marker).match,
                                                                              names))]
        if other:
            raise InvalidParameterError(f"architecture={architecture!r}, but no attention tensors are in the "
                                        f"{architecture!r} naming: they are in the {other[0]!r} naming. Pass "
                                        f"architecture={other[0]!r}, or leave architecture=None to detect it.")
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    raise InvalidParameterError(
        f"unknown architecture: no attention tensors{want} among the {len(names)} tensors ({shown}). Known namings: "
        + "; ".join(f"{k}: {v.marker}" for k, v in ARCHITECTURES.items()) + ". Rename the tensors to one of these."
    )


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
    n_heads, heads = config_heads(n_heads, config, "load_attention"), heads_given(n_heads, config)
    tensors = read_tensors(source)
    arch, prefix, n_layers = detect_architecture(tensors, architecture)
    return _load(tensors, arch, prefix, n_layers, layer, n_heads, fold_norm, config, heads=heads)


@declare(source=SOURCE, n_heads=_HEADS, architecture=_ARCH, fold_norm=Boolean(), config=_CONFIG)
def load_attention_layers(source, *, n_heads: int | None = None, architecture: str | None = None,
                          fold_norm: bool = False, config=None) -> list[AttentionWeights]:
    """Every attention sublayer of a model, in order (:func:`load_attention`; ``n_heads`` or ``config``)."""
    caller = "load_attention_layers"
    n_heads, heads = config_heads(n_heads, config, caller), heads_given(n_heads, config)
    tensors = read_tensors(source)
    arch, prefix, n_layers = detect_architecture(tensors, architecture)
    check_layer_count(config, n_layers, arch, prefix, caller)
    check_widths(tensors, arch, prefix, range(n_layers), caller)
    return [_load(tensors, arch, prefix, n_layers, i, n_heads, fold_norm, config, caller, heads)
            for i in range(n_layers)]


def _load(tensors, arch, prefix, n_layers, layer, n_heads, fold_norm, config,
          caller="load_attention", heads="n_heads") -> AttentionWeights:
    layer = check_param(layer, "layer", caller, low=0, high=n_layers - 1, integer=True)
    n_heads = check_param(n_heads, "n_heads", caller, low=1, integer=True)
    if not isinstance(fold_norm, (bool, np.bool_)):
        raise InvalidParameterError(f"The 'fold_norm' parameter of {caller} must be True or False; got {fold_norm!r}.")
    check_widths(tensors, arch, prefix, (layer,), caller)
    check_config(config, tensors, arch, prefix, layer, n_heads, caller)
    spec = ARCHITECTURES[arch]
    get = TensorGetter(tensors, heads)
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
