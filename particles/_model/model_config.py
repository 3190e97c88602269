"""What a trained model's config and its tensors must agree on, checked before the heads are cut.

A config (``config.json`` of the checkpoint, as a dict) states the number of heads, and often the
width, the head size, the key/value heads of a grouped-query model and the number of layers. The
tensors state the same things through their shapes. When they disagree the file and the config
belong to different models (or one of them was edited): loading would give heads that are not the
model's, so it is refused, naming the config key, the tensor and its shape, and the fix.

The tensors of one model also share one width d (the residual stream's): a tensor of another width
comes from another model, and it is named by itself (not the good tensor it was compared with).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from .._core.errors import InvalidParameterError
from .._core.params import Integer

__all__ = ["HEAD_KEYS", "config_heads", "heads_given", "check_widths", "check_config", "check_layer_count"]

#: the keys of a config that hold the number of (query) attention heads: BERT and Llama, GPT-2
HEAD_KEYS = ("num_attention_heads", "n_head")
#: keys of the model's width, of its number of layers (BERT and Llama, GPT-2)
WIDTH_KEYS = ("hidden_size", "n_embd")
LAYER_KEYS = ("num_hidden_layers", "n_layer")
#: config model_type -> the naming its checkpoints use (types not listed are not compared)
MODEL_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "electra": "bert", "gpt2": "gpt2",
               "llama": "llama", "mistral": "llama", "qwen2": "llama"}
# per naming: (tensor name pattern, axis of the model width d) of the 2-d attention weights
_WIDTH_AXES = {
    "bert": ((r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.weight", 1),
             (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.weight", 0)),
    "gpt2": ((r"h\.(\d+)\.attn\.c_attn\.weight", 0), (r"h\.(\d+)\.attn\.c_proj\.weight", 0)),
    "llama": ((r"layers\.(\d+)\.self_attn\.[qkv]_proj\.weight", 1), (r"layers\.(\d+)\.self_attn\.o_proj\.weight", 0)),
}


def _config_int(config, key, caller):
    return int(Integer(1).check(config[key], f"config[{key!r}]", caller))


def _config_key(config, keys, caller):
    """The key among synonyms ``keys`` that ``config`` holds (None if none); two that disagree are refused."""
    held = [] if config is None else [k for k in keys if k in config]
    if len(held) > 1:
        values = {k: _config_int(config, k, caller) for k in held}
        if len(set(values.values())) > 1:
            shown = " and ".join(f"config[{k!r}] = {v}" for k, v in values.items())
            raise InvalidParameterError(f"{shown} of {caller} disagree, yet both give the same quantity: correct the "
                                        "config so that they agree, or drop the wrong key.")
    return held[0] if held else None


def config_heads(n_heads, config, caller: str) -> int:
    """The number of heads: ``n_heads`` when given, else the config's (which must then hold it)."""
    key = _config_key(config, HEAD_KEYS, caller)
    found = None if key is None else _config_int(config, key, caller)
    if n_heads is None and found is None:
        where = "" if config is None else f" (the config has none of {list(HEAD_KEYS)})"
        raise InvalidParameterError(f"{caller} needs the number of attention heads: pass n_heads=... or the model's "
                                    f"config=...{where}.")
    if n_heads is not None and found is not None and int(n_heads) != found:
        raise InvalidParameterError(f"n_heads={n_heads} of {caller} contradicts the config's {found} heads: pass one "
                                    "of them.")
    return int(found if n_heads is None else n_heads)


def heads_given(n_heads, config) -> str:
    """How the head count is given, for the messages that refuse it: ``"n_heads"`` (the argument) or
    the config key that holds it, e.g. ``"config['num_attention_heads']"``."""
    key = None if n_heads is not None else _config_key(config, HEAD_KEYS, "")
    return "n_heads" if key is None else f"config[{key!r}]"


def _gpt2_transposed(name, shape):
    """A GPT-2 c_attn of shape (3k, k) is an nn.Linear (out, in) layout: Conv1D stores (in, out)."""
    d = shape[1]
    raise InvalidParameterError(
        f"tensor {name!r} has shape {shape}, the transpose of GPT-2's layout: Conv1D stores c_attn as (in, out) = "
        f"(d, 3 d) = ({d}, {3 * d}), and this one is (out, in) like an nn.Linear weight. Transpose it (and c_proj) "
        "before loading, e.g. tensors[name] = tensors[name].T, or load the checkpoint as GPT-2 saved it.")


def check_widths(tensors, arch: str, prefix: str, layers, caller: str) -> None:
    """Refuse attention tensors of ``layers`` whose width is not the model's (the most common
    width among all its attention tensors), naming them; a transposed GPT-2 ``c_attn`` is named as such."""
    widths = {}
    for pattern, axis in _WIDTH_AXES[arch]:
        rx = re.compile(re.escape(prefix) + pattern + "$")
        for name, value in tensors.items():
            m = rx.match(name)
            shape = np.shape(value)
            if m is None or len(shape) != 2:
                continue  # absent or not 2-d: the loader names it
            if arch == "gpt2" and "c_attn" in name and shape[0] == 3 * shape[1] and int(m.group(1)) in layers:
                _gpt2_transposed(name, shape)
            widths[name] = (shape[axis], int(m.group(1)), shape)
    counts = Counter(w for w, _, _ in widths.values())
    if len(counts) < 2:
        return
    (d, n_d), = counts.most_common(1)
    odd = [(name, shape) for name, (w, layer, shape) in widths.items() if w != d and layer in layers]
    if not odd:
        return
    shown = "; ".join(f"{name!r} of shape {shape}" for name, shape in odd[:4]) + (" ..." if len(odd) > 4 else "")
    raise InvalidParameterError(
        f"{caller}: the attention tensors do not share one width: {n_d} of {len(widths)} have the model's width d = "
        f"{d}, but {shown} {'has' if len(odd) == 1 else 'have'} another. A model has one width: these come from "
        "another model or were edited; load a file (or dict) holding one model's tensors.")


def check_config(config, tensors, arch: str, prefix: str, layer: int, n_heads: int, caller: str) -> None:
    """Refuse a config that contradicts the tensors of ``layer`` (module docstring)."""
    if config is None:
        return
    model_type = config.get("model_type")
    if isinstance(model_type, str) and MODEL_TYPES.get(model_type, arch) != arch:
        raise InvalidParameterError(
            f"config['model_type'] = {model_type!r} of {caller} is a {MODEL_TYPES[model_type]} model, but the tensors "
            f"are in the {arch} naming: the config belongs to another checkpoint; pass this checkpoint's config.json.")
    weight = {"bert": f"{prefix}encoder.layer.{layer}.attention.self.query.weight",
              "gpt2": f"{prefix}h.{layer}.attn.c_proj.weight",
              "llama": f"{prefix}layers.{layer}.self_attn.q_proj.weight"}[arch]
    shape = np.shape(tensors.get(weight, ()))
    if len(shape) != 2:
        return  # the loader names the missing or malformed tensor
    width_key = _config_key(config, WIDTH_KEYS, caller)
    if width_key is not None and _config_int(config, width_key, caller) != shape[1]:
        raise InvalidParameterError(
            f"config[{width_key!r}] = {config[width_key]} of {caller} contradicts the tensors: {weight!r} has shape "
            f"{shape}, i.e. width d = {shape[1]}. The config belongs to another checkpoint: pass this one's config.")
    if arch == "llama":
        _check_llama(config, tensors, weight, shape, n_heads, caller)
    elif config.get("num_key_value_heads") is not None:  # no grouped queries: as many key/value heads as heads
        kv = _config_int(config, "num_key_value_heads", caller)
        if kv != n_heads:
            raise InvalidParameterError(
                f"config['num_key_value_heads'] = {kv} of {caller} contradicts the tensors: a {arch} layer has no "
                f"grouped-query attention, so its key/value heads are its {n_heads} heads ({weight!r} has shape "
                f"{shape}). The config belongs to another checkpoint: pass this one's config.json, or drop the key.")


def _check_llama(config, tensors, q_name, q_shape, n_heads, caller):
    """head_dim and num_key_value_heads of a grouped-query config against q_proj and k_proj."""
    if q_shape[0] % n_heads:
        return  # the loader says n_heads does not divide q_proj's rows
    dh = q_shape[0] // n_heads
    # (null is how a config.json says "the default": the tensors decide)
    if config.get("head_dim") is not None and _config_int(config, "head_dim", caller) != dh:
        raise InvalidParameterError(
            f"config['head_dim'] = {config['head_dim']} of {caller} contradicts the tensors: {q_name!r} has shape "
            f"{q_shape}, i.e. {q_shape[0]} // {n_heads} heads = {dh} per head. Pass this checkpoint's config.json "
            "(or the n_heads that makes head_dim agree).")
    k_name = q_name.replace("q_proj", "k_proj")
    k_shape = np.shape(tensors.get(k_name, ()))
    if config.get("num_key_value_heads") is None or len(k_shape) != 2:
        return
    kv = _config_int(config, "num_key_value_heads", caller)
    if kv * dh != k_shape[0]:
        found = f"{k_shape[0] // dh}" if k_shape[0] % dh == 0 else f"{k_shape[0]} / {dh} (not a whole number of)"
        raise InvalidParameterError(
            f"config['num_key_value_heads'] = {kv} of {caller} contradicts the tensors: {k_name!r} has shape "
            f"{k_shape}, i.e. {found} key/value heads of head_dim {dh} ({q_name!r} has shape {q_shape} with n_heads = "
            f"{n_heads}); it would need {kv * dh} rows. Pass this checkpoint's own config.json, or correct "
            "num_key_value_heads (and num_attention_heads) to match its tensors.")


def check_layer_count(config, n_layers: int, arch: str, prefix: str, caller: str) -> None:
    """Refuse a config whose number of layers is not the number the tensors hold (a shard or another model)."""
    key = _config_key(config, LAYER_KEYS, caller)
    if key is None:
        return
    want = _config_int(config, key, caller)
    if want != n_layers:
        raise InvalidParameterError(
            f"config[{key!r}] = {want} of {caller}, but the tensors hold {n_layers} {arch} layer(s) (prefix "
            f"{prefix!r}, layers 0..{n_layers - 1}): a shard of a sharded checkpoint (model-0000k-of-0000m."
            "safetensors), or another model's config. Merge the shards' tensors into one dict (read_tensors of "
            "each) or pass this checkpoint's config.json.")
