"""Inputs of the trained-head loaders, the sentence flow and animate once taken silently, and a user file
that animate replaced."""

import json
import re
import struct

import numpy as np
import pytest

import metrics
import particles
from particles import InvalidParameterError

D = 8


def _bert(rng, layers=1):
    return {f"encoder.layer.{k}.attention.{n}.{w}": rng.standard_normal((D, D) if w == "weight" else D)
            for k in range(layers)
            for n in ("self.query", "self.key", "self.value", "output.dense") for w in ("weight", "bias")}


def test_overlapping_tensor_bytes_are_a_damaged_header(rng):
    """Two tensors whose data_offsets overlap would read the same bytes (Wk == Wq): refused, both named."""
    t = {k: v.astype("<f4") for k, v in _bert(rng).items()}
    header = {k: {"dtype": "F32", "shape": list(v.shape), "data_offsets": [0, v.nbytes]} for k, v in t.items()}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    blob = struct.pack("<Q", len(h)) + h + t["encoder.layer.0.attention.self.query.weight"].tobytes()
    with pytest.raises(InvalidParameterError, match="overlapping data_offsets"):
        particles.load_attention(blob, 0, n_heads=2)


@pytest.mark.parametrize("heads", [2.5, True, 0, -2, "2"])
def test_a_config_head_count_that_is_not_a_positive_whole_number_is_refused(rng, heads):
    with pytest.raises(InvalidParameterError, match=r"config\['num_attention_heads'\].* must be an integer"):
        particles.load_attention(_bert(rng), 0, config={"num_attention_heads": heads})
    assert particles.load_attention(_bert(rng), 0, config={"num_attention_heads": 2.0}).n_heads == 2


def test_sentence_flow_names_its_own_dt_when_it_is_longer_than_the_flow(rng):
    w = particles.load_attention(_bert(rng), 0, n_heads=2)
    x0 = particles.sample_uniform(5, D, rng)
    with pytest.raises(InvalidParameterError, match=r"dt = 5 of sentence_flow is longer than the whole flow"):
        metrics.sentence_flow(w, x0, t1=0.1, dt=5.0)


def test_animate_replaces_only_an_animation(tmp_path):
    model = particles.MultiHead.scalar([1.0], d=3, beta=4.0, kind="softmax")
    traj = particles.simulate(particles.sample_uniform(6, 3, 0), model, t1=0.3, dt=0.1,
                              save=particles.SaveAt(ts=np.linspace(0, 0.3, 3)))
    ds = metrics.trajectory_to_dataset(traj, model)
    mine = tmp_path / "mine.gif"
    mine.write_bytes(b"my notes")
    with pytest.raises(InvalidParameterError, match="exists and is not a GIF or MP4 animation"):
        metrics.animate(ds, mine, dpi=30, progress=False)
    assert mine.read_bytes() == b"my notes"
    out = metrics.animate(ds, tmp_path / "tokens.gif", dpi=30, progress=False)
    metrics.animate(ds, out, dpi=30, progress=False)  # its own animation is replaced (a rerun)
    assert out.read_bytes()[:6] == b"GIF89a"


def _llama(rng, layers=1, heads=4, kv_heads=2, dh=2):
    t = {}
    for i in range(layers):
        b = f"model.layers.{i}.self_attn."
        t[b + "q_proj.weight"] = rng.standard_normal((heads * dh, D))
        t[b + "k_proj.weight"] = rng.standard_normal((kv_heads * dh, D))
        t[b + "v_proj.weight"] = rng.standard_normal((kv_heads * dh, D))
        t[b + "o_proj.weight"] = rng.standard_normal((D, heads * dh))
    return t


@pytest.mark.parametrize("kv", [1, 4])
def test_a_llama_config_whose_key_value_heads_contradict_the_tensors_is_refused(rng, kv):
    """k_proj holds 2 key/value heads of head_dim 2; a config saying otherwise belongs to another model."""
    t = _llama(rng)
    with pytest.raises(InvalidParameterError, match=rf"config\['num_key_value_heads'\] = {kv} .*k_proj.weight' has "
                                                    r"shape \(4, 8\), i.e. 2 key/value heads.*Pass this checkpoint"):
        particles.load_attention(t, config={"num_attention_heads": 4, "num_key_value_heads": kv})
    w = particles.load_attention(t, config={"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 2,
                                            "hidden_size": D, "model_type": "llama"})
    np.testing.assert_array_equal(w.Wk[1], w.Wk[0])  # heads 0 and 1 read key group 0
    assert not np.array_equal(w.Wk[2], w.Wk[0])


@pytest.mark.parametrize("config, key", [({"head_dim": 4}, "head_dim"), ({"hidden_size": 12}, "hidden_size"),
                                         ({"model_type": "gpt2"}, "model_type")])
def test_other_config_keys_that_contradict_the_tensors_are_named(rng, config, key):
    with pytest.raises(InvalidParameterError, match=rf"config\['{key}'\]"):
        particles.load_attention(_llama(rng), config={"num_attention_heads": 4, **config})


def test_a_config_with_more_layers_than_the_tensors_hold_is_refused_as_a_shard(rng):
    with pytest.raises(InvalidParameterError, match=r"config\['num_hidden_layers'\] = 3.*hold 2 llama layer.*shard"):
        particles.load_attention_layers(_llama(rng, layers=2), config={"num_attention_heads": 4,
                                                                        "num_hidden_layers": 3})
    assert len(particles.load_attention_layers(_llama(rng, layers=2), config={"num_attention_heads": 4,
                                                                              "num_hidden_layers": 2})) == 2


@pytest.mark.parametrize("odd", ["encoder.layer.1.attention.self.query.weight",
                                 "encoder.layer.0.attention.self.key.weight"])
def test_a_tensor_of_another_width_is_named_not_the_good_one_beside_it(rng, odd):
    t = _bert(rng, layers=2)
    t[odd] = rng.standard_normal((12, 12))
    with pytest.raises(InvalidParameterError, match="do not share one width") as info:
        particles.load_attention_layers(t, n_heads=2)
    assert odd in str(info.value)
    good = [name for name in t if name.endswith("weight") and name != odd]
    assert not any(repr(name) in str(info.value) for name in good)


def test_whole_layers_of_another_width_are_named(rng):
    t = _bert(rng, layers=3)
    t.update({k.replace("layer.0", "layer.2"): rng.standard_normal((12, 12) if k.endswith("weight") else 12)
              for k in _bert(rng) if k.endswith("weight")})
    with pytest.raises(InvalidParameterError, match=r"width d = 8, but 'encoder.layer.2.attention.self.query"):
        particles.load_attention_layers(t, n_heads=2)
    assert particles.load_attention(t, 1, n_heads=2).d == D  # a good layer of the file still loads alone


def test_an_untransposed_gpt2_c_attn_is_named_as_transposed(rng):
    t = {"h.0.attn.c_attn.weight": rng.standard_normal((3 * D, D)), "h.0.attn.c_proj.weight": np.eye(D)}
    with pytest.raises(InvalidParameterError, match=r"shape \(24, 8\), the transpose of GPT-2's layout.*\(8, 24\)"
                                                    r".*Transpose it"):
        particles.load_attention(t, n_heads=2)
    t["h.0.attn.c_attn.weight"] = t["h.0.attn.c_attn.weight"].T
    assert particles.load_attention(t, n_heads=2).d == D


# ------------------------------------------------------------------ the time a simulate config implies


def _simulate(tmp_path, body, capsys):
    from headflow import cli

    cfg = tmp_path / "run.toml"
    cfg.write_text(body)
    status = cli.main(["simulate", str(cfg), "--out", str(tmp_path / "run.nc"), "--no-progress"])
    return status, capsys.readouterr()


@pytest.mark.parametrize("body, key", [("[run]\nn = 20000\nmax_hours = 1e-9\n", r"\[run\] n"),
                                       ("[run]\nn = 8\nt1 = 5000.0\nmax_hours = 1e-9\n", r"\[run\] dt \(or t1\)")])
def test_a_run_estimated_beyond_max_hours_is_refused_naming_the_key_before_it_starts(tmp_path, capsys, body, key):
    status, said = _simulate(tmp_path, body, capsys)
    assert status == 2 and "Traceback" not in said.err
    assert re.search(rf"{key} makes this run too long: it would take about .* steps of about .*timed on this "
                     r"machine.*beyond \[run\] max_hours = 1e-09.*raise \[run\] max_hours", said.err)
    assert not (tmp_path / "run.nc").exists()


def test_a_long_run_says_its_estimate_before_the_first_step(tmp_path, capsys, monkeypatch):
    from headflow import _work

    monkeypatch.setattr(_work, "NOTE_SECONDS", 0.0)  # every run is "long": the note must come first
    status, said = _simulate(tmp_path, "[run]\nn = 8\nt1 = 0.1\ndt = 0.05\nn_saves = 2\n", capsys)
    assert status == 0
    note = said.out.index("this run will take about")
    assert note < said.out.index("wrote") and "2 steps of about" in said.out and "2 saves of about" in said.out


def test_the_estimate_scales_by_the_summation_route_of_the_heads():
    from headflow._work import summation_growth

    rng = np.random.default_rng(0)
    assert summation_growth(particles.MultiHead.scalar([1.0], d=3, summation="exact"))[0] == 2
    assert summation_growth(particles.MultiHead.scalar([1.0], d=3, kind="relu"))[0] == 2
    full_rank = rng.standard_normal((5, 5))
    assert summation_growth(particles.MultiHead(full_rank + full_rank.T))[0] == 2
    if particles.summation.fast_available():
        assert summation_growth(particles.MultiHead.scalar([1.0, 0.5], d=3))[0] == 1


@pytest.mark.parametrize("name", ["encoder.layer.0.attention.self.key.weight",
                                  "encoder.layer.0.attention.output.dense.bias"])
def test_a_non_finite_tensor_is_named_by_its_name_in_the_file(rng, name):
    t = _bert(rng)
    t[name] = t[name].copy()
    t[name].flat[3] = np.nan
    with pytest.raises(InvalidParameterError, match=rf"tensor '{re.escape(name)}' holds 1 NaN and 0 inf entries"):
        particles.load_attention(t, n_heads=2)
