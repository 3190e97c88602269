"""Trained attention layers as MultiHead models: one Euler step of size 1 of the flat dynamics is
the layer's attention output, against each architecture's equations written here in numpy
from the raw tensors (nothing shared with the loader)."""

import sys

import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy  # in the test extra: its absence fails

import particles
from particles import AttentionWeights, InvalidParameterError, MultiHead, load_attention, load_attention_layers

D, H, N = 12, 3, 7


# ----------------------------------------------------------------------- independent references
def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _attend(q, k, v, causal):
    """q (n, H, dh), k and v (n, H, dh) -> context (n, H * dh)."""
    n, h, dh = q.shape
    s = np.einsum("ihk,jhk->hij", q, k) / np.sqrt(dh)
    if causal:
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    return np.einsum("hij,jhk->ihk", _softmax(s), v).reshape(n, h * dh)


def _f64(t, name):
    return np.asarray(t[name], dtype=np.float64)


def bert_attention(t, i, x, heads):
    b = f"encoder.layer.{i}.attention."
    n, d = x.shape
    qkv = [(x @ _f64(t, f"{b}self.{c}.weight").T + _f64(t, f"{b}self.{c}.bias")).reshape(n, heads, -1)
           for c in ("query", "key", "value")]
    return _attend(*qkv, False) @ _f64(t, f"{b}output.dense.weight").T + _f64(t, f"{b}output.dense.bias")


def gpt2_attention(t, i, x, heads):
    b = f"h.{i}.attn."
    n, d = x.shape
    qkv = x @ _f64(t, f"{b}c_attn.weight") + _f64(t, f"{b}c_attn.bias")  # Conv1D: x W + b
    q, k, v = (qkv[:, c * d:(c + 1) * d].reshape(n, heads, -1) for c in range(3))
    return _attend(q, k, v, True) @ _f64(t, f"{b}c_proj.weight") + _f64(t, f"{b}c_proj.bias")


def llama_attention(t, i, x, heads, kv_heads):
    b = f"model.layers.{i}.self_attn."
    n, d = x.shape
    q = (x @ _f64(t, f"{b}q_proj.weight").T).reshape(n, heads, -1)
    k, v = ((x @ _f64(t, f"{b}{c}_proj.weight").T).reshape(n, kv_heads, -1) for c in "kv")
    k, v = (np.repeat(a, heads // kv_heads, axis=1) for a in (k, v))  # repeat_kv of transformers
    return _attend(q, k, v, True) @ _f64(t, f"{b}o_proj.weight").T


def layer_norm(x, g, b):
    c = x - x.mean(axis=1, keepdims=True)
    return g * c / np.sqrt((c * c).mean(axis=1, keepdims=True)) + b


# ----------------------------------------------------------------------- synthetic files
def _f32(rng, *shape, scale=0.4):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def bert_tensors(rng, layers=2, prefix=""):
    t = {f"{prefix}embeddings.LayerNorm.weight": 1 + _f32(rng, D), f"{prefix}embeddings.LayerNorm.bias": _f32(rng, D)}
    for i in range(layers):
        b = f"{prefix}encoder.layer.{i}."
        for c in ("query", "key", "value"):
            t[f"{b}attention.self.{c}.weight"], t[f"{b}attention.self.{c}.bias"] = _f32(rng, D, D), _f32(rng, D)
        t[f"{b}attention.output.dense.weight"], t[f"{b}attention.output.dense.bias"] = _f32(rng, D, D), _f32(rng, D)
        t[f"{b}output.LayerNorm.weight"], t[f"{b}output.LayerNorm.bias"] = 1 + _f32(rng, D), _f32(rng, D)
    return t


def gpt2_tensors(rng, layers=2):
    t = {}
    for i in range(layers):
        b = f"h.{i}."
        t[f"{b}attn.c_attn.weight"], t[f"{b}attn.c_attn.bias"] = _f32(rng, D, 3 * D), _f32(rng, 3 * D)
        t[f"{b}attn.c_proj.weight"], t[f"{b}attn.c_proj.bias"] = _f32(rng, D, D), _f32(rng, D)
        t[f"{b}ln_1.weight"], t[f"{b}ln_1.bias"] = 1 + _f32(rng, D), _f32(rng, D)
    return t


def llama_tensors(rng, heads=4, kv_heads=2, layers=1):
    dh, t = D // heads, {}
    for i in range(layers):
        b = f"model.layers.{i}."
        t[f"{b}self_attn.q_proj.weight"] = _f32(rng, heads * dh, D)
        t[f"{b}self_attn.k_proj.weight"] = _f32(rng, kv_heads * dh, D)
        t[f"{b}self_attn.v_proj.weight"] = _f32(rng, kv_heads * dh, D)
        t[f"{b}self_attn.o_proj.weight"] = _f32(rng, D, heads * dh)
        t[f"{b}input_layernorm.weight"] = 1 + _f32(rng, D)
    return t


def _euler_step(model, x):
    """One Euler step of size 1 of the flat dynamics, minus the start."""
    traj = particles.simulate(x, model, t1=1.0, dt=1.0, method="euler")
    return traj.x_final - x


def _augment(x):
    return np.hstack([x, np.ones((len(x), 1))])


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


CASES = {
    "bert": (bert_tensors, lambda t, i, x: bert_attention(t, i, x, H), H),
    "gpt2": (gpt2_tensors, lambda t, i, x: gpt2_attention(t, i, x, H), H),
    "llama": (llama_tensors, lambda t, i, x: llama_attention(t, i, x, 4, 2), 4),
}


@pytest.mark.parametrize("arch", CASES)
def test_euler_step_is_the_attention_output(arch, rng, tmp_path):
    make, reference, heads = CASES[arch]
    tensors = make(rng)
    path = tmp_path / f"{arch}.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    x = 2.0 * rng.standard_normal((N, D))
    for layer in range(len(load_attention_layers(path, n_heads=heads))):
        w = load_attention(path, layer, n_heads=heads)
        assert w.architecture == arch and w.Wq.dtype == np.float64 and w.causal == (arch != "bert")
        step = _euler_step(w.to_multihead(bias="augment", geometry="flat"), _augment(x))
        ref = reference(tensors, layer, x)
        assert _rel(step[:, :D], ref) < 1e-12
        assert np.all(step[:, D] == 0.0)  # the homogeneous coordinate stays 1


@pytest.mark.parametrize("arch", CASES)
def test_folded_norm_reads_the_normalised_tokens(arch, rng):
    """The folded layer on n(x) (norm's core) equals norm-then-attention on x; on the sphere
    u = n(x)/sqrt(d) with beta = d it is the same velocity over sqrt(d), projected."""
    make, reference, heads = CASES[arch]
    tensors = make(rng)
    x = rng.standard_normal((N, D)) + 0.5
    layer = 1 if arch != "llama" else 0
    w = load_attention(tensors, layer, n_heads=heads, fold_norm=True)
    if arch == "bert":
        g, b = (_f64(tensors, f"encoder.layer.0.output.LayerNorm.{k}") for k in ("weight", "bias"))
        a, core = layer_norm(x, g, b), layer_norm(x, 1.0, 0.0)
    elif arch == "gpt2":
        g, b = (_f64(tensors, f"h.1.ln_1.{k}") for k in ("weight", "bias"))
        a, core = layer_norm(x, g, b), layer_norm(x, 1.0, 0.0)
    else:
        core = x / np.sqrt((x * x).mean(axis=1, keepdims=True))
        a = _f64(tensors, "model.layers.0.input_layernorm.weight") * core
    step = _euler_step(w.to_multihead(bias="augment", geometry="flat"), _augment(core))
    assert _rel(step[:, :D], reference(tensors, layer, a)) < 1e-12
    u = particles.norm_sphere(x, "rmsnorm" if arch == "llama" else "layernorm")
    np.testing.assert_allclose(u * np.sqrt(D), core, atol=1e-12)
    flat = w.to_multihead(geometry="flat", beta=1.0).velocity(core) / np.sqrt(D)
    sphere = w.to_multihead(beta=float(D)).velocity(u)
    np.testing.assert_allclose(sphere, particles.project_tangent(u, flat), atol=1e-12 * np.abs(flat).max())


def test_bias_free_heads_and_the_key_bias(rng):
    """bias='drop' is exact when only the key bias is non-zero (softmax ignores terms constant
    in j) and wrong when the query bias is."""
    t = bert_tensors(rng, layers=1)
    for c in ("query", "value"):
        t[f"encoder.layer.0.attention.self.{c}.bias"][:] = 0
    t["encoder.layer.0.attention.output.dense.bias"][:] = 0
    x = rng.standard_normal((N, D))
    w = load_attention(t, n_heads=H)
    ref = bert_attention(t, 0, x, H)
    assert w.has_bias and _rel(_euler_step(w.to_multihead(geometry="flat"), x), ref) < 1e-12
    t["encoder.layer.0.attention.self.query.bias"][:] = 1.0
    ref = bert_attention(t, 0, x, H)
    assert _rel(_euler_step(load_attention(t, n_heads=H).to_multihead(geometry="flat"), x), ref) > 1e-3


def test_heads_are_the_projections(rng):
    """M_h = W_Q,h^T W_K,h / sqrt(d_head) from_qk's rectangular stacks; grouped heads share K, V."""
    t = llama_tensors(rng, heads=4, kv_heads=2)
    w = load_attention(t, n_heads=4)
    Wq = _f64(t, "model.layers.0.self_attn.q_proj.weight").reshape(4, 3, D)
    Wk = _f64(t, "model.layers.0.self_attn.k_proj.weight").reshape(2, 3, D)
    np.testing.assert_array_equal(w.Wk[0], w.Wk[1])
    np.testing.assert_array_equal(w.Wk[2], Wk[1])
    m = MultiHead.from_qk(Wq / 3 ** 0.25, w.Wk / 3 ** 0.25, w.value_matrices())
    np.testing.assert_allclose(m.M, w.score_matrices(), rtol=1e-13, atol=1e-15)
    assert np.all(np.linalg.matrix_rank(w.score_matrices()) <= 3)


def test_prefixes_bytes_and_detection(rng, tmp_path):
    t = bert_tensors(rng, layers=3, prefix="bert.")
    data = safetensors_numpy.save(t)
    ws = load_attention_layers(data, n_heads=H, fold_norm=True)
    assert [w.layer for w in ws] == [0, 1, 2] and all(w.norm == "layernorm" for w in ws)
    w = load_attention(t, 2, n_heads=H, architecture="bert")
    np.testing.assert_array_equal(w.Wq, ws[2].Wq / _f64(t, "bert.encoder.layer.1.output.LayerNorm.weight"))


def test_bad_files(rng, tmp_path):
    t = gpt2_tensors(rng, layers=1)
    with pytest.raises(InvalidParameterError, match=r"n_heads = 5 does not divide the width d = 12"):
        load_attention(t, n_heads=5)
    with pytest.raises(InvalidParameterError, match=r"unknown architecture.*bert.*gpt2.*llama"):
        load_attention({"foo.weight": np.eye(3)}, n_heads=1)
    with pytest.raises(InvalidParameterError,
                       match="'architecture' parameter of load_attention must be None or one of"):
        load_attention(t, n_heads=3, architecture="t5")
    # GPT-2 tensors read as BERT: the refusal names the naming they are in, not "rename the tensors"
    with pytest.raises(InvalidParameterError, match=r"no attention tensors are in the 'bert' naming: they are in "
                                                    r"the 'gpt2' naming\. Pass architecture='gpt2'") as err:
        load_attention(t, n_heads=3, architecture="bert")
    assert "Rename" not in str(err.value)
    with pytest.raises(InvalidParameterError, match=r"no attention tensors in the 'bert' naming.*Rename"):
        load_attention({"foo.weight": np.eye(3)}, n_heads=1, architecture="bert")
    bad = dict(t)
    del bad["h.0.attn.c_proj.weight"]
    with pytest.raises(InvalidParameterError, match=r"missing tensor 'h\.0\.attn\.c_proj\.weight'"):
        load_attention(bad, n_heads=3)
    bad = dict(t, **{"h.0.attn.c_proj.weight": np.zeros((12, 11), np.float32)})
    with pytest.raises(InvalidParameterError, match=r"'h\.0\.attn\.c_proj\.weight' has the wrong shape: expected "
                                                    r"\(12, 12\)"):
        load_attention(bad, n_heads=3)
    bad = dict(t, **{"h.0.attn.c_attn.weight": np.zeros((12, 30), np.float32)})
    with pytest.raises(InvalidParameterError, match=r"expected \(12, 36\), got \(12, 30\)"):
        load_attention(bad, n_heads=3)
    with pytest.raises(InvalidParameterError, match="tensor 'h.0.ln_1.weight', which the tensors lack"):
        load_attention({k: v for k, v in t.items() if "ln_1" not in k}, n_heads=3, fold_norm=True)
    with pytest.raises(InvalidParameterError, match=r"layer.*\[0, 0\]"):
        load_attention(t, 1, n_heads=3)
    with pytest.raises(InvalidParameterError, match=r"k_proj.weight' has 9 rows, which fit no head count"):
        load_attention(llama_tensors(rng, heads=4, kv_heads=3), n_heads=4)
    (tmp_path / "junk.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(InvalidParameterError, match="not a readable safetensors file"):
        load_attention(tmp_path / "junk.safetensors", n_heads=3)
    with pytest.raises(InvalidParameterError, match="no file at"):
        load_attention(tmp_path / "absent.safetensors", n_heads=3)
    with pytest.raises(TypeError, match="must be a path, bytes or a dict"):
        load_attention(3.0, n_heads=3)
    w = load_attention(t, n_heads=3)
    with pytest.raises(InvalidParameterError, match="bias='augment'.*geometry='flat'"):
        w.to_multihead(bias="augment")
    with pytest.raises(InvalidParameterError, match=r"Wo of AttentionWeights must have shape \(3, 12, 4\)"):
        AttentionWeights(w.Wq, w.Wk, w.Wv, w.Wo[:, :, :3])


def test_files_read_without_the_extra(monkeypatch, rng, tmp_path):
    """The safetensors reader is numpy alone: the files load where the package is absent."""
    t = gpt2_tensors(rng, layers=1)
    safetensors_numpy.save_file(t, str(tmp_path / "m.safetensors"))
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    w = load_attention(tmp_path / "m.safetensors", n_heads=3)
    np.testing.assert_array_equal(w.Wq, load_attention(t, n_heads=3).Wq)


def test_against_transformers_bert_attention(rng):
    """Optional: where torch and transformers are installed, the library's own BertAttention
    (post-LN: LayerNorm(x + attention output)) agrees with LayerNorm(x + Euler step)."""
    torch = pytest.importorskip("torch")
    bert = pytest.importorskip("transformers.models.bert.modeling_bert")
    from transformers import BertConfig

    t = bert_tensors(rng, layers=1)
    config = BertConfig(hidden_size=D, num_attention_heads=H, attention_probs_dropout_prob=0.0,
                        hidden_dropout_prob=0.0, layer_norm_eps=1e-12)
    module = bert.BertAttention(config).double().eval()
    prefix = "encoder.layer.0.attention."
    state = {k[len(prefix):]: torch.from_numpy(_f64(t, k)) for k in t if k.startswith(prefix)}
    state["output.LayerNorm.weight"] = torch.from_numpy(_f64(t, "encoder.layer.0.output.LayerNorm.weight"))
    state["output.LayerNorm.bias"] = torch.from_numpy(_f64(t, "encoder.layer.0.output.LayerNorm.bias"))
    module.load_state_dict(state)
    x = rng.standard_normal((N, D))
    with torch.no_grad():
        ref = module(torch.from_numpy(x)[None])[0][0].numpy()
    step = _euler_step(load_attention(t, n_heads=H).to_multihead(bias="augment", geometry="flat"), _augment(x))
    ours = layer_norm(x + step[:, :D], state["output.LayerNorm.weight"].numpy(), state["output.LayerNorm.bias"].numpy())
    assert _rel(ours, ref) < 1e-10
