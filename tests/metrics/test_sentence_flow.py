"""Sentence flows under trained heads; the real MiniLM model (installed by .ci/run with --no-deps)."""

import numpy as np
import pytest
import xarray as xr

import particles
from metrics import head_geometry
from metrics.sentences import (
    bert_embeddings,
    read_model_zip,
    sentence_flow,
    tokenize,
)
from particles import InvalidParameterError, load_attention, load_attention_layers, norm_sphere
from tests.helpers import real_model_zip
from tests.particles.test_pretrained import (
    H,
    _augment,
    _euler_step,
    _f64,
    _rel,
    bert_attention,
    bert_tensors,
    gpt2_attention,
    layer_norm,
    llama_attention,
)


@pytest.fixture
def synthetic(rng):
    t = bert_tensors(rng, layers=3)
    return load_attention_layers(t, n_heads=H, fold_norm=True), norm_sphere(rng.standard_normal((6, 12)))


def test_stack_is_the_composition_of_layer_flows(synthetic):
    """The TimeDependent stack (Euler steps landing on the layer boundaries) is simulate_layers."""
    ws, u = synthetic
    ds = sentence_flow(ws, u, layer_time=0.5, dt=0.05, saves_per_layer=2, beta=4.0)
    models = [w.to_multihead(beta=4.0, summation="exact") for w in ws]
    ref = particles.simulate_layers(u, models, layer_time=0.5, dt=ds.attrs["dt"], method="euler", n_saves_per_layer=2)
    np.testing.assert_allclose(ds.positions.values, ref.x, atol=1e-12)
    assert ds.layer_index.values.tolist() == [0, 0, 1, 1, 2, 2, 2]
    np.testing.assert_allclose(np.linalg.norm(ds.positions, axis=-1), 1.0, atol=1e-12)


def test_one_layer_diagnostics_and_netcdf(synthetic, tmp_path):
    ws, u = synthetic
    toks = [f"t{i}" for i in range(6)]
    ds = sentence_flow(ws[0], u, tokens=toks, t1=1.0, saves_per_layer=4, dt=0.05)
    assert ds.sizes["time"] == 5 and ds.token.values.tolist() == toks
    assert float(ds.entropy.max()) <= np.log(6) + 1e-12
    np.testing.assert_allclose(ds.mean_entropy, ds.entropy.mean("particle"), rtol=1e-14)
    np.testing.assert_allclose(ds.rate_residual, ds.energy_rate - ds.kinetic, rtol=1e-12, atol=1e-300)
    assert np.all(ds.n_clusters.values == ds.cluster_label.max("particle").values + 1)
    # the first save is the state itself: diagnose agrees
    dg = particles.diagnose(ws[0].to_multihead(beta=12.0), u)
    np.testing.assert_allclose(ds.rd_margin_min.isel(time=0), dg["rd_margin_min"], rtol=1e-12)
    ds.to_netcdf(tmp_path / "flow.nc")
    with xr.open_dataset(tmp_path / "flow.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_bad_arguments(synthetic, rng):
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match="t1 = 2 of sentence_flow is for one layer"):
        sentence_flow(ws, u, t1=2.0)
    with pytest.raises(InvalidParameterError, match="x0 of sentence_flow has d = 3"):
        sentence_flow(ws, norm_sphere(rng.standard_normal((4, 3))))
    with pytest.raises(InvalidParameterError, match="tokens of sentence_flow must name the 6 tokens"):
        sentence_flow(ws[0], u, tokens=["a"])
    with pytest.raises(InvalidParameterError, match="must be an AttentionWeights"):
        sentence_flow([], u)
    with pytest.raises(InvalidParameterError, match="missing tensor 'embeddings.word_embeddings.weight'"):
        bert_embeddings({}, [1, 2])
    with pytest.raises(InvalidParameterError, match=r"'ids' parameter of bert_embeddings: word indices .*\[0, 4\)"):
        bert_embeddings({f"embeddings.{p}_embeddings.weight": np.ones((4, 3))
                         for p in ("word", "position", "token_type")}, [1, 7])


def _minilm():
    return read_model_zip(real_model_zip())


def test_minilm_real_model():
    """MiniLM (BERT, 6 x 12 heads, d = 384): the Euler step is its attention on a real sentence;
    the report covers 6 x 66 head pairs with consistent numbers; the sentence flows."""
    tensors, tokenizer, config = _minilm()
    n_heads = config["num_attention_heads"]
    ids, toks = tokenize(tokenizer, "Attention heads move tokens on the sphere.")
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    e = bert_embeddings(tensors, ids)
    core = layer_norm(e, 1.0, 0.0)
    a = layer_norm(e, _f64(tensors, "embeddings.LayerNorm.weight"), _f64(tensors, "embeddings.LayerNorm.bias"))
    for fold, x in ((False, a), (True, core)):
        w = load_attention(tensors, 0, n_heads=n_heads, fold_norm=fold)
        step = _euler_step(w.to_multihead(bias="augment", geometry="flat", summation="exact"), _augment(x))
        assert _rel(step[:, :384], bert_attention(tensors, 0, a, n_heads)) < 1e-12
    # the other namings on the same real tokens (synthetic 384-wide weights: no such model is installed)
    rng = np.random.default_rng(7)
    w32 = lambda *shape: (0.05 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    gpt2 = {"h.0.attn.c_attn.weight": w32(384, 1152), "h.0.attn.c_attn.bias": w32(1152),
            "h.0.attn.c_proj.weight": w32(384, 384), "h.0.attn.c_proj.bias": w32(384)}
    llama = {f"model.layers.0.self_attn.{c}_proj.weight": w32(*s) for c, s in
             (("q", (384, 384)), ("k", (128, 384)), ("v", (128, 384)), ("o", (384, 384)))}
    for t, ref in ((gpt2, lambda: gpt2_attention(gpt2, 0, a, 12)),
                   (llama, lambda: llama_attention(llama, 0, a, 12, 4))):
        step = _euler_step(load_attention(t, n_heads=12).to_multihead(bias="augment", geometry="flat",
                                                                       summation="exact"), _augment(a))
        assert _rel(step[:, :384], ref()) < 1e-12
    ws = load_attention_layers(tensors, n_heads=n_heads)
    ds = head_geometry(ws)
    assert dict(ds.sizes) == {"layer": 6, "pair": 66, "angle": 32, "head": 12, "eig": 32}
    assert float(ds.score_angle.min()) >= 0 and float(ds.score_angle.max()) <= 90 + 1e-9
    assert not ds.score_angle.isnull().any()  # every head has full rank d_head = 32
    np.testing.assert_allclose(ds.self_norm, ds.singular_value.isel(eig=0) ** 2, rtol=1e-10)
    assert np.all(np.isnan(ds.beta_star)) and all("fail" in str(r) for r in ds.beta_star_reason.values)
    u = norm_sphere(e)
    flow = sentence_flow(load_attention(tensors, 0, n_heads=n_heads, fold_norm=True), u, t1=0.5, saves_per_layer=2,
                         dt=0.1)
    np.testing.assert_allclose(np.linalg.norm(flow.positions, axis=-1), 1.0, atol=1e-12)
    assert flow.sizes["particle"] == len(ids) and flow.attrs["beta"] == 384.0


def test_missing_tokenizers_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r'headflow\[trained\]'):
        tokenize("{}", "a sentence")
    with pytest.raises(InvalidParameterError, match="'text' parameter of tokenize must be a non-empty string"):
        tokenize("{}", " ")


def test_tokens_shape_before_norm_and_the_documented_fix(synthetic, rng):
    """Transposed tokens are named as such; raw embeddings are sent to particles.norm_sphere."""
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match=r"has d = 6 columns; the layers are 12-dimensional"):
        sentence_flow(ws, 3 * u.T)
    with pytest.raises(InvalidParameterError, match=r"particles\.norm_sphere\(embeddings\)"):
        sentence_flow(ws, 3 * u)


def test_head_geometry_sentence_and_a_stack_t1_name_the_fix(synthetic):
    """head_geometry's sentence gets sentence_flow's hint (norm_sphere, not an L2 normalisation);
    t1 given to a stack says what a stack runs and what to do."""
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match=r"sentence of head_geometry must lie .*particles\.norm_sphere"):
        head_geometry(ws, sentence=3 * u)
    with pytest.raises(InvalidParameterError, match=r"sentence of head_geometry has d = 6 columns.*transposed"):
        head_geometry(ws, sentence=u.T)
    with pytest.raises(InvalidParameterError, match=rf"t1 = 60 of sentence_flow is for one layer; a stack of {len(ws)} "
                                                    rf"layers runs .* = {len(ws)}: leave t1 out"):
        sentence_flow(ws, u, t1=60)


def test_flow_measured_against_the_network(synthetic):
    """Per layer and bias treatment: the augmented flat model is the layer (cosine 1, ratio 1 against
    an attention computed from the projections); dropping the biases costs a measured amount."""
    from metrics._data.fidelity import attention_output

    ws, u = synthetic
    ds = sentence_flow(ws, u, layer_time=0.5, dt=0.05, saves_per_layer=2)
    assert ds.network_cosine.dims == ("layer", "bias") and list(ds.bias.values) == ["drop", "augment"]
    np.testing.assert_allclose(ds.network_cosine.sel(bias="augment"), 1.0, atol=1e-12)
    np.testing.assert_allclose(ds.network_norm_ratio.sel(bias="augment"), 1.0, atol=1e-12)
    drop = ds.network_cosine.sel(bias="drop").values
    assert np.all(np.abs(drop) < 1 - 1e-6)  # the synthetic layers have biases: dropping them is not free
    # the layer's output on the flow's tokens at the start of layer 1, by hand (bert_attention)
    x1 = ds.positions.sel(time=0.5).values
    t = bert_tensors(np.random.default_rng(0), layers=1)
    w = load_attention(t, 0, n_heads=H)
    a = np.sqrt(12) * x1
    np.testing.assert_allclose(attention_output(w, a), bert_attention(t, 0, a, H), rtol=1e-12, atol=1e-12)
    # the time is in layers, with its convention
    assert "layers" in ds.time.attrs["long_name"] and "layer k acts on [k tau, (k+1) tau)" in ds.time.attrs[
        "convention"] and ds.time.attrs["layer_time"] == 0.5
    assert ds.attn.kind == "sentence_flow"
    geo = head_geometry(ws, sentence=u)
    np.testing.assert_allclose(geo.network_cosine.isel(layer=0), ds.network_cosine.isel(layer=0), rtol=1e-12)


def test_flow_plot_one_panel_per_quantity_with_layer_boundaries_and_log_axes(synthetic):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws, u = synthetic
    ds = sentence_flow(ws, u, layer_time=1.0, dt=0.05, saves_per_layer=2)
    ds["energy_multi"] = ds.energy_multi * np.logspace(6, 0, ds.sizes["time"])  # values over six decades
    axes = ds.attn.plot()
    try:
        names = [ax.get_title() for ax in axes]
        assert names[0] == "energy_multi" and "mean_cosine" in names and len(set(names)) == len(names)
        assert axes[0].get_yscale() == "log" and axes[names.index("mean_cosine")].get_yscale() == "linear"
        boundaries = [line.get_xdata()[0] for line in axes[0].lines if line.get_linestyle() == ":"]
        assert boundaries == [1.0, 2.0]
    finally:
        plt.close("all")


def test_inputs_that_used_to_pass_silently(synthetic):
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match="'tokens' parameter of sentence_flow must be None or a sequence"):
        sentence_flow(ws[0], u, tokens="abcdef")  # six letters are not six tokens
    with pytest.raises(InvalidParameterError, match=r"'x0' parameter of sentence_flow must have shape .* n >= 2"):
        sentence_flow(ws[0], u[:1])  # one token has no mean cosine


@pytest.mark.parametrize("options, match", [
    (dict(t1=1e7), r"'dt' parameter of sentence_flow: the flow to t = 1e\+07 .* takes 2e\+08 steps"),
    (dict(dt=1e-9), r"'dt' parameter of sentence_flow: .* takes 1e\+09 steps, more than max_steps = 100000"),
    (dict(saves_per_layer=10**9), r"'saves_per_layer' parameter of sentence_flow: .* takes 1e\+09 steps"),
    (dict(t1=6e5, dt=1.0, max_steps=10**8), r"'saves_per_layer' parameter of sentence_flow: 2400001 saved"),
])
def test_unbounded_work_is_refused_before_it_starts(synthetic, options, match):
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match=match):
        sentence_flow(ws[0], u, **options)


def test_weights_whose_products_overflow_are_refused_naming_the_layer(rng):
    w = particles.AttentionWeights(*(1e160 * rng.standard_normal((3, 2, 2, 6))), Wo=rng.standard_normal((2, 6, 2)))
    with pytest.raises(InvalidParameterError, match=r"'layers' parameter of sentence_flow: layer 0's weights reach"):
        sentence_flow(w, norm_sphere(rng.standard_normal((4, 6))))


def test_max_steps_allows_a_long_run_and_progress_follows_the_library_rule(synthetic, capsys, monkeypatch):
    ws, u = synthetic
    with pytest.raises(InvalidParameterError, match="more than max_steps = 10"):
        sentence_flow(ws[0], u, t1=1.0, dt=0.05, max_steps=10)
    ds = sentence_flow(ws[0], u, t1=1.0, dt=0.05, max_steps=20)
    assert ds.sizes["time"] == 5 and "sentence flow" not in capsys.readouterr().err  # quick: no bar
    sentence_flow(ws[0], u, t1=1.0, dt=0.05, progress=True)
    assert "5/5" in capsys.readouterr().err
    from metrics._runs import progress

    monkeypatch.setattr(progress, "AUTO_DELAY", 0.0)  # None: a bar once the run has taken AUTO_DELAY seconds
    sentence_flow(ws[0], u, t1=1.0, dt=0.05)
    assert "sentence flow" in capsys.readouterr().err
    sentence_flow(ws[0], u, t1=1.0, dt=0.05, progress=False)
    assert "sentence flow" not in capsys.readouterr().err


def test_loaders_name_what_is_wrong(tmp_path):
    import zipfile

    with pytest.raises(InvalidParameterError, match="'type_ids' parameter of bert_embeddings must be a non-empty 1-D"):
        bert_embeddings({}, [0, 1], type_ids=[0.5, 0.0])  # float type ids
    with pytest.raises(InvalidParameterError, match="'tokenizer_json' parameter of tokenize must be the JSON text"):
        tokenize("", "a sentence")
    with pytest.raises(InvalidParameterError, match="'tokenizer_json' parameter of tokenize names the path .* no file"):
        tokenize(str(tmp_path / "absent" / "tokenizer.json"), "a sentence")
    with pytest.raises(InvalidParameterError, match="'tokenizer_json' parameter of tokenize is not valid JSON"):
        tokenize("{oops", "a sentence")
    pytest.importorskip("tokenizers")
    with pytest.raises(InvalidParameterError, match="'tokenizer_json' parameter of tokenize is JSON but not a"):
        tokenize('{"model": 3}', "a sentence")
    for member, content, match in [("model.safetensors", b"\x01\x02", "its model.safetensors is damaged"),
                                   ("config.json", b"{not json", "its config.json is not JSON")]:
        members = {"model.safetensors": _tiny_safetensors(), "tokenizer.json": b"{}", "config.json": b"{}"}
        members[member] = content
        path = tmp_path / f"{member}.zip"
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
        with pytest.raises(InvalidParameterError, match=match):
            read_model_zip(path)


def _tiny_safetensors() -> bytes:
    import json

    head = json.dumps({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    return len(head).to_bytes(8, "little") + head + np.float32(1.0).tobytes()


def test_a_tokenizer_path_is_read(tmp_path):
    tensors, tokenizer, _ = _minilm()
    (tmp_path / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    ids, toks = tokenize(tmp_path / "tokenizer.json", "Attention heads.")
    assert np.array_equal(ids, tokenize(tokenizer, "Attention heads.")[0])
    assert bert_embeddings(tensors, ids).shape[0] == len(ids)
    with pytest.raises(InvalidParameterError, match="integer dtype"):  # integral floats are not taken as ids
        bert_embeddings(tensors, ids.astype(float))
