r"""How each architecture lays out one attention layer's tensors, cut into heads.

Each tensor is checked against the model's width d (the hidden size: the width of the layer's
attention tensors, which :func:`~particles._model.model_config.check_widths` has already found to be
the model's) before tensors are compared with each other, so that a broken tensor is named by itself
and never through the intact one it would have been compared with. The head count, which the
tensors do not store, is named as given: ``n_heads = 3`` or ``config['num_attention_heads'] = 3``.

Biases come as a set per layer: a layer carries all of its architecture's biases or none (Llama
carries none, Qwen2 its q, k and v biases). Only the key bias may be absent alone: it adds to the
logits of a query the same term for every key, which softmax ignores, so loading it as zero is exact
(some checkpoints omit it for that reason). Any other bias missing beside the others would load as
zero and change the heads, so it is refused naming the missing tensor.
"""

from __future__ import annotations

import numpy as np

from .._core.errors import InvalidParameterError

__all__ = ["TensorGetter", "split_bert", "split_gpt2", "split_llama"]


class TensorGetter:
    """Fetch named tensors as float64 with errors that name the tensor, its shape and the fix.

    ``heads`` is how the head count was given, for the errors about it: ``"n_heads"`` (the
    argument) or a config key such as ``"config['num_attention_heads']"``.
    """

    def __init__(self, tensors, heads: str = "n_heads"):
        self.tensors = tensors
        self.heads = heads

    def __call__(self, name, *, ndim=None, shape=None, optional=False, why=""):
        if name not in self.tensors:
            if optional:
                return None
            near = [k for k in self.tensors if k.rsplit(".", 2)[0] == name.rsplit(".", 2)[0]][:6]
            raise InvalidParameterError(f"missing tensor {name!r} (tensors beside it: {near or 'none'}); the file is "
                                        "incomplete or in another naming: pass architecture=... to choose one.")
        arr = np.asarray(self.tensors[name])
        if not np.issubdtype(arr.dtype, np.floating):
            raise InvalidParameterError(f"tensor {name!r} must hold floating-point numbers; got dtype {arr.dtype}.")
        if arr.size == 0:
            raise InvalidParameterError(f"tensor {name!r} is empty (shape {arr.shape}): it holds no numbers. The file "
                                        "is damaged or was edited: use an intact copy of the checkpoint.")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError(
                f"tensor {name!r} holds {int(np.isnan(arr).sum())} NaN and {int(np.isinf(arr).sum())} inf entries: the "
                "file is damaged, or the model was saved after its training diverged. Use an intact copy of the "
                "checkpoint.")
        if ndim is not None and arr.ndim != ndim:
            raise InvalidParameterError(f"tensor {name!r} must be {ndim}-dimensional; got shape {arr.shape}.")
        if shape is not None:
            self.shape(name, arr, shape, why)
        return arr

    @staticmethod
    def shape(name, arr, shape, why=""):
        if arr.shape != tuple(shape):
            raise InvalidParameterError(f"tensor {name!r} has the wrong shape: expected {tuple(shape)}, got {arr.shape}"
                                        f"{why}. The tensor was edited or comes from another model.")

    def misfit(self, n_heads, detail):
        """Refuse the head count: it does not fit the tensors (``detail`` says how)."""
        if self.heads == "n_heads":
            fix = "pass the model's num_attention_heads (n_heads=..., or config= the model's config.json)"
        else:
            fix = ("the config contradicts the tensors: pass this checkpoint's own config.json, or n_heads= the "
                   "model's head count")
        raise InvalidParameterError(f"{self.heads} = {n_heads} {detail}; {fix}.")

    def biases(self, names, harmless=()):
        """The biases ``names`` of one layer, all (as arrays, unchecked) or none (module docstring)."""
        held = [n for n in names if n in self.tensors]
        lacking = [n for n in names if n not in self.tensors and n not in harmless]
        if held and lacking:
            note = " (only the key bias may be absent alone: softmax ignores it)" if harmless else ""
            raise InvalidParameterError(
                f"missing tensor{'s' * (len(lacking) > 1)} {', '.join(map(repr, lacking))}: the layer carries the "
                f"biases {', '.join(map(repr, held))}, and a missing bias loaded as zero would change the heads"
                f"{note}. The file is incomplete or was edited: use an intact copy of the checkpoint.")


def _heads(W, n_heads):
    """Rows of an (n_heads * d_head, d) Linear weight as (n_heads, d_head, d)."""
    rows, d = W.shape
    return W.reshape(n_heads, rows // n_heads, d)


def _out_heads(Wo, n_heads):
    """An (d, n_heads * d_head) output weight as (n_heads, d, d_head)."""
    d, cols = Wo.shape
    return Wo.reshape(d, n_heads, cols // n_heads).transpose(1, 0, 2)


def _bias_heads(bias, n_heads):
    return None if bias is None else bias.reshape(n_heads, -1)


def split_bert(get, p, i, H):
    base = f"{p}encoder.layer.{i}.attention."
    names = {c: f"{base}self.{c}" for c in ("query", "key", "value")} | {"out": f"{base}output.dense"}
    Wq = get(f"{names['query']}.weight", ndim=2)
    d = Wq.shape[1]
    why = f" (query, key, value and output are (d, d) with the hidden size d = {d})"
    W = {c: get(f"{n}.weight", shape=(d, d), why=why) for c, n in names.items()}
    if d % H:
        get.misfit(H, f"does not divide the width d = {d} of {names['query']}.weight")
    get.biases([f"{n}.bias" for n in names.values()], harmless={f"{names['key']}.bias"})
    b = {c: get(f"{n}.bias", shape=(d,), optional=True) for c, n in names.items()}
    return {"Wq": _heads(W["query"], H), "Wk": _heads(W["key"], H), "Wv": _heads(W["value"], H),
            "Wo": _out_heads(W["out"], H), "bo": b["out"], "bq": _bias_heads(b["query"], H),
            "bk": _bias_heads(b["key"], H), "bv": _bias_heads(b["value"], H)}


def split_gpt2(get, p, i, H):
    base = f"{p}h.{i}.attn."
    Wc = get(f"{base}c_attn.weight", ndim=2)
    d = Wc.shape[0]
    get.shape(f"{base}c_attn.weight", Wc, (d, 3 * d), f" ((d, 3 d) with the hidden size d = {d})")
    Wp = get(f"{base}c_proj.weight", shape=(d, d), why=f" ((d, d) with the hidden size d = {d})")
    if d % H:
        get.misfit(H, f"does not divide the width d = {d} of {base}c_attn.weight")
    get.biases([f"{base}c_attn.bias", f"{base}c_proj.bias"])
    bc = get(f"{base}c_attn.bias", shape=(3 * d,), optional=True)
    # Conv1D stores (in, out): the Linear weight is the transpose
    Wq, Wk, Wv = (_heads(Wc[:, k * d:(k + 1) * d].T, H) for k in range(3))
    out = {"Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": _out_heads(Wp.T, H),
           "bo": get(f"{base}c_proj.bias", shape=(d,), optional=True)}
    for k, name in enumerate(("bq", "bk", "bv")):
        out[name] = None if bc is None else _bias_heads(bc[k * d:(k + 1) * d], H)
    return out


def _query_rows(get, q, o, Wq, Wo, d):
    """The rows of q_proj, which o_proj's columns must equal (both n_heads * head_dim); of two that
    disagree, the one that is not the hidden size d (the usual head layout) is named."""
    rows, cols = Wq.shape[0], Wo.shape[1]
    if rows == cols:
        return rows
    if cols == d:
        get.shape(q, Wq, (d, d), f" (n_heads * head_dim rows, which {o!r} has as columns: {d}, the hidden size)")
    if rows == d:
        get.shape(o, Wo, (d, d), f" (n_heads * head_dim columns, which {q!r} has as rows: {d}, the hidden size)")
    raise InvalidParameterError(
        f"tensor {q!r} has {rows} rows but {o!r} has {cols} columns: both are n_heads * head_dim and must agree. One "
        "of them was edited or comes from another model: use an intact copy of the checkpoint.")


def _kv_misfit(get, q, k, H, rows, kv):
    """k_proj's rows are not n_kv_heads * head_dim with n_kv_heads dividing H: name H if another
    head count fits the tensors, else k_proj."""
    fits = [h for h in range(1, rows + 1) if rows % h == 0 and kv % (rows // h) == 0 and h % (kv // (rows // h)) == 0]
    dh = rows // H
    if fits:
        get.misfit(H, f"does not fit the layer: it makes head_dim = {rows} / {H} = {dh} ({q!r} has {rows} rows), and "
                      f"the {kv} rows of {k!r} are not n_kv_heads * {dh} with n_kv_heads dividing {H}. Head counts "
                      f"that fit these tensors: {', '.join(map(str, fits))}")
    raise InvalidParameterError(
        f"tensor {k!r} has {kv} rows, which fit no head count: k_proj holds n_kv_heads * head_dim rows with head_dim "
        f"= {rows} / n_heads ({q!r} has {rows} rows) and n_kv_heads dividing n_heads ({get.heads} = {H} gives "
        f"head_dim {dh}). The tensor was edited or comes from another model: use an intact copy of the checkpoint.")


def split_llama(get, p, i, H):
    base = f"{p}layers.{i}.self_attn."
    q, k, v, o = (f"{base}{c}_proj.weight" for c in "qkvo")
    Wq, Wk, Wv, Wo = (get(name, ndim=2) for name in (q, k, v, o))
    d = Wq.shape[1]
    rows = _query_rows(get, q, o, Wq, Wo, d)
    get.shape(o, Wo, (d, rows), f" ((d, n_heads * head_dim) with the hidden size d = {d})")
    get.shape(k, Wk, (Wk.shape[0], d), f" ((n_kv_heads * head_dim, d) with the hidden size d = {d})")
    if rows % H:
        get.misfit(H, f"does not divide the {rows} rows of {q} (n_heads * head_dim)")
    kv = Wk.shape[0]
    if kv % (rows // H) or H % (kv // (rows // H)):
        _kv_misfit(get, q, k, H, rows, kv)
    get.shape(v, Wv, Wk.shape, f" (the shape of {k!r}: as many value heads as key heads)")
    dh, Hkv = rows // H, kv // (rows // H)
    group = np.arange(H) * Hkv // H  # head h reads key/value group floor(h Hkv / H)
    out = {"Wq": _heads(Wq, H), "Wk": _heads(Wk, Hkv)[group], "Wv": _heads(Wv, Hkv)[group], "Wo": _out_heads(Wo, H),
           "bo": get(f"{base}o_proj.bias", shape=(d,), optional=True)}
    get.biases([f"{base}{c}_proj.bias" for c in "qkv"], harmless={f"{base}k_proj.bias"})
    for c, key, n in (("q", "bq", H), ("k", "bk", Hkv), ("v", "bv", Hkv)):
        bias = get(f"{base}{c}_proj.bias", shape=(n * dh,), optional=True)
        out[key] = None if bias is None else (bias.reshape(n, dh) if n == H else bias.reshape(n, dh)[group])
    return out
