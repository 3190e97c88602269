"""Figures and animations: seconds per helper, from the call to the file on disk.

Quick datasets of every kind headflow makes (built first, not timed): trajectories of 60 tokens on
S^1 and S^2 (softmax, beta = 4, 21 saves), a sweep (2 n_particles x 2 seeds), a phase diagram
(5 beta x 16 systems), a chaos study (n = 100, 300, 2 seeds) and a limit study on S^1. Each helper
draws into a new figure and writes a PNG (dpi 100, Agg), timed end to end (best of ``--repeat``
after one untimed warm-up call, which also pays matplotlib's first import); ``animate`` writes a
GIF (Pillow) of the S^2 trajectory, and the target case: 200 tokens on S^2 over 100 frames.

Target (issue "The researcher's notebook"): every helper < 5 s on a quick dataset; the animation of
200 tokens on S^2 over 100 frames < 30 s.

Run:  python benchmarks/bench_plots.py [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import matplotlib

matplotlib.use("Agg")
import _timing  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import metrics  # noqa: E402
import particles  # noqa: E402


def trajectory(n: int, d: int, n_saves: int, t1: float = 6.0):
    model = particles.MultiHead.scalar([1.0], d=d, beta=4.0, kind="softmax")
    x0 = particles.sample_uniform(n, d=d, rng=np.random.default_rng(0))
    traj = particles.simulate(x0, model, t1=t1, dt=0.05,
                              save=particles.SaveAt(ts=np.linspace(0, t1, n_saves)), progress=False)
    return metrics.trajectory_to_dataset(traj, model)


def datasets() -> dict:
    s1 = particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    return {
        "trajectory S^1": trajectory(60, 2, 21),
        "trajectory S^2": trajectory(60, 3, 21),
        "sweep": metrics.run_sweep({"n_particles": [8, 16]}, n_seeds=2, t1=1.0, dt=0.05, n_saves=11,
                                   metrics=("n_clusters", "energy_multi")),
        "phase diagram": metrics.phase_diagram(np.linspace(0.5, 8.0, 5), n=16, d=8, kind="softmax", t1=10.0,
                                               n_systems=16, chunk=16, n_saves=11, method="rk4", dt=0.5, seed=0),
        "chaos study": metrics.chaos_horizon_study(s1, n_values=[100, 300], n_seeds=2, t1=10.0, n_saves=81,
                                                   delta=(0.2,), l_max=4, dt=0.05, n_boot=50),
        "limit study": metrics.mean_field_limit_study(s1, lambda x: 1 + 0.5 * x[:, 0], n_values=(16, 64), n_seeds=3,
                                                      t1=0.2, n_saves=2, m_grid=64, dt=0.05),
    }


def cases(ds: dict, out: pathlib.Path) -> dict:
    def png(draw, name):
        def run():
            ax = draw()
            fig = np.ravel(ax)[0].figure
            fig.savefig(out / f"{name}.png", dpi=100)
            plt.close(fig)
        return run

    big = trajectory(200, 3, 100, t1=10.0)
    return {
        "plot_angles (S^1, 60 tokens, 21 saves)": png(ds["trajectory S^1"].attn.plot_angles, "angles"),
        "plot_sphere (S^2, 60 tokens)": png(ds["trajectory S^2"].attn.plot_sphere, "sphere"),
        "plot_curves (trajectory: energy, entropy, clusters evaluated)": png(ds["trajectory S^2"].attn.plot_curves,
                                                                              "curves_trajectory"),
        "plot_curves (sweep)": png(ds["sweep"].attn.plot_curves, "curves_sweep"),
        "plot_phase_diagram": png(ds["phase diagram"].attn.plot_phase_diagram, "phase"),
        "plot_chaos_collapse": png(ds["chaos study"].attn.plot_chaos_collapse, "collapse"),
        "plot_chaos_horizon": png(ds["chaos study"].attn.plot_chaos_horizon, "horizon"),
        "plot_limit_study": png(ds["limit study"].attn.plot_limit_study, "limit"),
        "animate (S^2, 60 tokens, 21 frames, GIF)": lambda: ds["trajectory S^2"].attn.animate(out / "small.gif"),
        "animate (S^2, 200 tokens, 100 frames, GIF)": lambda: big.attn.animate(out / "big.gif"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None, help="keep the files here (default: a temporary folder)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="bench_plots_"))
    out.mkdir(parents=True, exist_ok=True)
    timings = {name: _timing.best_of(fn, args.repeat) for name, fn in cases(datasets(), out).items()}
    print(_timing.header(timings.values(), title=f"figures and animations, best of {args.repeat}, files in {out}"))
    print("\n| helper | seconds | file size (kB) |\n|---|---:|---:|")
    sizes = {p.stem: p.stat().st_size / 1e3 for p in out.iterdir()}
    for (name, t), stem in zip(timings.items(), ["angles", "sphere", "curves_trajectory", "curves_sweep", "phase",
                                                 "collapse", "horizon", "limit", "small", "big"]):
        print(f"| {name} | {t.seconds:.2f} | {sizes.get(stem, float('nan')):.0f} |")


if __name__ == "__main__":
    main()
