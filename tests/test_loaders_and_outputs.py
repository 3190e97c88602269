"""Inputs of the trained-head loaders, the sentence flow and animate once taken silently, and a user file
that animate replaced."""

import json
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
