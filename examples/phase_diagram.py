"""Phase diagrams of clustering: softmax (T = 30) and USA (T = 1) in d = 8, 128 and 1024.

n = 32 tokens, one head M = W = I, i.i.d. uniform starts; for each beta the fraction of
clustered pairs (<x_i, x_j> >= 0.999) is averaged over random systems at every time t in
[0, T] (metrics.phase_diagram). The heat maps over (beta, t) carry the equiangular curve
t*(beta) = "time for equiangular tokens to reach rho = 0.999" (particles.theory.hitting_time):
below it nothing has clustered, above it most pairs have. As d grows, random tokens are
closer to orthogonal (<x_i, x_j> ~ d^{-1/2}) and the measured boundary sharpens onto the curve.

Accuracy: softmax with RK4, dt = 0.5 (the statistics differ from dt = 0.1 by < 0.005, below their
standard error); USA, whose rate grows like e^beta, with Dormand-Prince at rtol 1e-6 (first step
1e-4) and a step of its own for every system ("dopri5_systems": a shared adaptive step moves at the
pace of the system in the fastest transient; a save time inside a step gets the step's dense
output). On 64 systems at beta = 3, 6, 9 (d = 8) every system's clustered-pair fraction at every
save time equals the one of a shared dopri5 step at rtol 1e-8, for 3.3x, 6.4x and 4.7x fewer
evaluations. Tokens that come within 1e-6 of each other are merged for good (``merge=1e-6``: a
formed cluster is one weighted token, with no stiff contraction left): the same statistics again at
every save time, and 18.3x fewer evaluations than the reference at beta = 9
(benchmarks/bench_usa_steppers.py; with ``--d 128`` the statistics at beta = 6 and 9 equal the
reference's at every save time as well, for 3.7x and 7.6x fewer evaluations). Every system is
simulated in min(d, n) coordinates (the span of the tokens is invariant when M = W = I), so d = 128
and d = 1024 cost the same as d = 32.

The full figure is 2048 systems x 90 betas per panel: 46 min 41 s with ``--workers 2`` on a 2-core
machine (softmax panels 119, 150, 149 s; USA 526, 1286, 568 s). ``--fraction F`` runs the full
settings on a fraction F of the systems and prints the time the full run would take (time / F; with
F >= 1/8 the chunks of 256 systems are full, as in the full run: the cost per system depends on the
batch); ``--quick`` is a small version for the test-suite.

Run:  python examples/phase_diagram.py --out outputs [--fraction 0.01] [--workers 2]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import pyplot, save_figure, write_table
from metrics import phase_diagram

FULL = {
    "n": 32, "dims": [8, 128, 1024], "n_systems": 2048, "n_saves": 61,
    "softmax": {"chunk": 256, "betas": np.linspace(0.1, 9.0, 90), "t1": 30.0, "method": "rk4", "dt": 0.5, "rtol": 1e-6},
    "usa": {"chunk": 256, "betas": np.linspace(0.1, 9.0, 90), "t1": 1.0, "method": "dopri5_systems", "dt": 1e-4,
            "rtol": 1e-6, "merge": 1e-6},
}
# quick: fewer systems and betas; USA up to beta = 5 (its cost grows like e^beta)
QUICK = {
    "n": 32, "dims": [8, 128, 1024], "n_systems": 24, "n_saves": 31,
    "softmax": {"chunk": 256, "betas": np.linspace(0.1, 9.0, 12), "t1": 30.0, "method": "rk4", "dt": 0.5, "rtol": 1e-6},
    "usa": {"chunk": 64, "betas": np.linspace(0.1, 5.0, 6), "t1": 1.0, "method": "dopri5_systems", "dt": 1e-4,
            "rtol": 1e-6, "merge": 1e-6},
}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--out", default="outputs", help="output folder")
    ap.add_argument("--quick", action="store_true", help="small sizes (for the test-suite)")
    ap.add_argument("--fraction", type=float, default=1.0, help="run this fraction of the systems of each panel")
    ap.add_argument("--workers", type=int, default=1, help="processes (engine='process' when > 1)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return args, out


def crossing(betas, y, level):
    """First beta where y(beta) crosses ``level`` (linear interpolation; NaN if it never does)."""
    side = np.sign(np.asarray(y, dtype=float) - level)
    k = np.nonzero(side != side[0])[0]
    if side[0] == 0 or k.size == 0:
        return float("nan")
    k = k[0]
    return float(np.interp(level, sorted([y[k - 1], y[k]]),
                           [betas[k - 1], betas[k]] if y[k - 1] < y[k] else [betas[k], betas[k - 1]]))


def run(cfg, args, out):
    panels, rows = {}, []
    n_systems = max(2, int(round(cfg["n_systems"] * args.fraction)))
    engine = "process" if args.workers > 1 else "serial"
    for kind in ("softmax", "usa"):
        k = cfg[kind]
        for d in cfg["dims"]:
            t = time.perf_counter()
            ds = phase_diagram(k["betas"], n=cfg["n"], d=d, kind=kind, t1=k["t1"], n_systems=n_systems,
                               chunk=k["chunk"], n_saves=cfg["n_saves"], method=k["method"], dt=k["dt"], rtol=k["rtol"],
                               merge=k.get("merge", 0.0), seed=0, engine=engine, max_workers=args.workers)
            seconds = time.perf_counter() - t
            ds.attrs["elapsed_seconds"] = seconds
            ds.to_netcdf(out / f"phase_diagram_{kind}_d{d}.nc", engine="netcdf4")
            panels[kind, d] = ds
            final = ds.clustered_pairs.isel(time=-1).values
            rows.append((kind, d, k["t1"], n_systems, len(k["betas"]), crossing(k["betas"], final, 0.5),
                         crossing(k["betas"], ds.theory_time.values, k["t1"]),
                         float(ds.clustered_pairs_se.max()), int(ds.success.min()), seconds,
                         seconds / args.fraction))
    return panels, rows


def figures(panels, cfg, out):
    plt = pyplot()
    fig, axes = plt.subplots(2, len(cfg["dims"]), figsize=(4.2 * len(cfg["dims"]), 7.0), squeeze=False,
                             layout="constrained")
    for i, kind in enumerate(("softmax", "usa")):
        for j, d in enumerate(cfg["dims"]):
            ax = panels[kind, d].attn.plot_phase_diagram(ax=axes[i, j], colorbar=False)
            ax.set_title(f"{kind}, d = {d}")
    fig.colorbar(ax.collections[0], ax=axes, shrink=0.6, label="fraction of clustered pairs")
    fig.get_layout_engine().set(w_pad=0.05, h_pad=0.05)
    fig.savefig(out / "phase_diagram.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, kind in zip(axes, ("softmax", "usa")):
        for d in cfg["dims"]:
            ds = panels[kind, d]
            final, se = ds.clustered_pairs.isel(time=-1), ds.clustered_pairs_se.isel(time=-1)
            ax.errorbar(ds.beta, final, yerr=se, marker=".", capsize=2, label=f"d = {d}")
        T = float(panels[kind, cfg["dims"][0]].time[-1])
        ax.set(title=f"{kind} at T = {T:g}: the transition sharpens with d", xlabel="beta",
               ylabel="fraction of clustered pairs")
        ax.legend()
    save_figure(fig, out / "phase_diagram_sharpening.png")


def main(argv=None):
    args, out = parse(argv)
    cfg = QUICK if args.quick else FULL
    panels, rows = run(cfg, args, out)
    figures(panels, cfg, out)
    table = write_table(out / "phase_diagram.md",
                        ["kind", "d", "T", "systems", "betas", "beta_1/2 measured", "beta where t* = T",
                         "max s.e.", "all succeeded", "seconds", "estimated full seconds"], rows)
    print(table)
    return panels, rows


if __name__ == "__main__":
    main()
