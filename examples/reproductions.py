"""Published results reproduced, and consistency checks: the numbers and verdicts of docs/reproductions.md.

Each row group runs one measurement (examples/_reproductions_rows.py: the library's closed forms
against its particles; _reproductions_published.py, _reproductions_circle.py and
_reproductions_metastable.py: published statements) and returns rows with a measured uncertainty
and, for most, a control that must come out the other way. The verdict of every row is computed by
the one rule of examples/_reproductions_verdict.py. Writes reproductions.nc (dim row; each curve on
its own named axis), reproductions.md (the page's tables) and reproductions.png.

Run:  python examples/reproductions.py --out docs/data --page docs/reproductions.md  (full sizes, the page)
      python examples/reproductions.py --out outputs --quick          (the test sizes)
      python examples/reproductions.py --out outputs --rows kpr_causal (one row group)
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import sys
import time

import numpy as np
import xarray as xr

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples import _reproductions_circle as C
from examples import _reproductions_figures as G
from examples import _reproductions_limits as L
from examples import _reproductions_metastable as M
from examples import _reproductions_page as page
from examples import _reproductions_published as P
from examples import _reproductions_rows as R
from examples._common import pyplot, save_figure

#: row group -> (function, full-size arguments, quick arguments); the quick ones are tests/reproductions'
ROWS = {
    "thm19_golden": (R.theorem19_cosine, {}, {}),
    "thm19_beta_star": (R.theorem19_beta_star, {}, {}),
    "thm22_early": (R.theorem22_early_rate, {}, {}),
    "thm27_entropy": (R.theorem27_entropy, {}, {}),
    "clpr_gamma_c": (R.clpr_gamma_c, {"ns": (10, 100, 1000, 2000)}, {"ns": (10, 100, 300)}),
    "grr_cap": (R.grr_cap, {"t1": 60.0}, {"t1": 20.0}),
    "thm22_late": (P.theorem22_late_rate, {}, {}),
    "thm25_relu": (P.theorem25_relu, {"n": 6}, {"n": 4, "rho0s": (1e-2, 1e-3, 1e-4, 1e-5)}),
    "bpa_mode": (M.bpa_mode, {"ns": (256, 512, 1024, 2048), "systems": (64, 48, 32, 16), "t1": 5.0, "dt": 0.05},
                 {"ns": (256, 384, 512), "systems": (24, 16, 12)}),
    "gkpr_jumps": (M.gkpr_jumps, {}, {"betas": (10.0, 11.0, 12.0), "reach": 20.0}),
    "noise_threshold": (M.noise_threshold, {"cells": (128, 256)}, {}),
    "pry_nonsync_threshold": (C.pry_threshold, {"ks": (2, 3, 6)}, {}),
    "pry_basin": (C.pry_basin, {"betas": (-2.0, -1.0, -0.6, -0.5), "k": 10, "seeds": 8},
                  {"k": 3, "seeds": 1, "t1": 120.0}),
    "pry_sync": (C.pry_sync, {"betas": (-0.16, 0.5, 1.0, 2.0), "n": 32, "seeds": 8, "t1": 400.0},
                 {"n": 12, "seeds": 2, "t1": 100.0}),
    "long_context_d3": (P.long_context, {"d": 3, "ns": (1000, 10000, 100000), "draws": 40}, {}),
    "long_context_d4": (P.long_context, {"d": 4, "ns": (1000, 10000, 100000), "draws": 40},
                        {"d": 4, "ns": (1000, 30000), "draws": 30}),
    "norm_rates": (P.norm_rates, {}, {"t_pre": (100.0, 1000.0)}),
    "glpr_usa": (L.glpr_limit, {"kind": "usa", "ds": (256, 1024, 4096, 16384, 65536)},
                 {"kind": "usa", "ds": (256, 1024, 4096), "systems": 16}),
    "glpr_softmax": (L.glpr_limit, {"kind": "softmax", "ds": (256, 1024, 4096, 16384, 65536)},
                     {"kind": "softmax", "ds": (256, 1024, 4096), "systems": 16}),
    "kpr_causal": (C.kpr_causal, {"n": 200, "seeds": 32}, {"n": 64, "seeds": 4}),
}
#: parameter names that are seeds, gathered for the page
SEED_NAMES = ("seed", "seeds", "frames", "frame")


def run_rows(keys, quick: bool) -> list:
    """The rows (and controls) of the groups ``keys`` at quick or full sizes."""
    out = []
    for key in keys:
        fn, full, small = ROWS[key]
        out.extend(fn(**(small if quick else full)))
    return out


def tree() -> str:
    """The commit of the code that ran ('+ changes' when the work tree differs from it), or 'unknown'."""
    import subprocess

    here = pathlib.Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + changes" if dirty else "")


def _kind(row) -> str:
    return "control" if row.control_of else page.ROW_TEXT[row.key].table


def to_dataset(rows, quick: bool, command: str = "", elapsed: float = float("nan"),
               stamp: str | None = None, load: str = "") -> xr.Dataset:
    """One entry per row along dim ``row``; each curve ``<row>__<name>`` on dims ``<row>_<axis>``. ``stamp``: the
    tree the run started from (:func:`tree` when not given); ``load``: the machine's 1-minute load average at the
    start and the end of the run."""
    num = {name: ("row", [getattr(r, name) for r in rows]) for name in
           ("measured", "sigma", "predicted", "pred_error", "alternative", "tolerance")}
    text = {name: ("row", np.array([str(f(r)) for r in rows])) for name, f in
            (("verdict", lambda r: r.verdict), ("sigma_from", lambda r: r.sigma_from), ("kind", _kind),
             ("control_of", lambda r: r.control_of))}
    ds = xr.Dataset({**num, **text}, coords={"row": ("row", [r.key for r in rows])})
    for name, long in (("measured", "headflow's measured number"), ("sigma", "measured uncertainty of measured"),
                       ("predicted", "the statement's value"), ("pred_error", "the prediction's own stated error"),
                       ("alternative", "competing value a discriminating run rejects (NaN: none)"),
                       ("tolerance", "2 sigma + pred_error"), ("verdict", "computed by the rule of the page")):
        ds[name].attrs["long_name"] = long
    seeds = {r.key: {k: v for k, v in r.params.items() if k in SEED_NAMES} for r in rows if not r.control_of}
    ds.attrs.update(quick=int(quick), command=command, elapsed_seconds=float(elapsed), tree=stamp or tree(),
                    load_average=load, cpus=int(os.cpu_count() or 1),
                    date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    machine=f"{platform.machine()}, {platform.processor() or platform.system()}, "
                            f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}",
                    seeds="; ".join(f"{k}: " + ", ".join(f"{n} {v}" for n, v in s.items()) for k, s in seeds.items()
                                    if s) or "none",
                    params=json.dumps({r.key: r.params for r in rows}, default=float),
                    extra=json.dumps({r.key: r.extra for r in rows}, default=float))
    for r in rows:
        _add_curves(ds, r)
    return ds


def _add_curves(ds, r) -> None:
    """Curves of row ``r``: named dims ``<row>_<axis>``; the first curve is the axis of its length."""
    if not r.curves:
        return
    axis, first = next(iter(r.curves.items()))
    for name, val in r.curves.items():
        val = np.asarray(val, dtype=float)
        dims = r.dims.get(name) or ((axis,) if val.shape == np.shape(first) else tuple(f"{name}_{i}" for i in
                                                                                       range(val.ndim)))
        ds[f"{r.key}__{name}"] = ([f"{r.key}_{d}" for d in dims], val, {"long_name": f"{name} of row {r.key}"})


#: the figure's panels: row, x and y curves, title, axis labels (math text), scale
PANELS = [("pry_nonsync_threshold", "beta", "growth", r"PRY: 3-cluster growth rate against $\beta$", r"$\beta$",
           "growth rate", "linear"),
          ("long_context_d3", "n", "beta_star", r"long context: $\beta^*_n$, top weight 1/2", "n (tokens)",
           r"$\beta^*_n$", "log"),
          ("grr_cap", "t", "diameter", r"cap $0.4\pi$ on $S^3$: diameter", "t", "diameter", "semilogy"),
          ("post_ln_rate", "t", "one_minus_rho", r"Post-LN: $1-\rho \sim e^{-2t}$", "t", r"$1-\rho$", "semilogy"),
          ("pre_ln_power", "t", "one_minus_rho", r"Pre-LN: $1-\rho \sim t^{-2}$", "t", r"$1-\rho$", "log"),
          ("kpr_causal", "t", "centres", r"KPR causal, $\beta = 64$: Rényi centres", "t", "Rényi centres (count)",
           "linear")]


def figure(ds, path) -> bool:
    """One panel per row of :data:`PANELS` that was run (rows not run leave no empty panel); False,
    and no file, when none was."""
    from matplotlib.ticker import MaxNLocator, NullFormatter

    panels = [p for p in PANELS if f"{p[0]}__{p[2]}" in ds]
    if not panels:
        return False
    plt = pyplot()
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.7 * cols, 3.75 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.remove()
    for ax, (key, xn, yn, title, xlabel, ylabel, scale) in zip(axes.flat, panels):
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        x, y = ds[f"{key}__{xn}"].values, np.atleast_2d(ds[f"{key}__{yn}"].values)
        for yy in y:
            ax.plot(x, yy, "o-" if len(x) < 40 else "-", ms=3, alpha=1.0 if len(y) == 1 else 0.4)
        if key == "long_context_d3" and "long_context_d4__beta_star" in ds:
            ax.plot(ds.long_context_d4__n, ds.long_context_d4__beta_star, "s-", ms=3)
            ax.legend(["d = 3", "d = 4"])
        if scale != "linear":
            ax.set(yscale="log", xscale="log" if scale == "log" else "linear")
            ax.xaxis.set_minor_formatter(NullFormatter())  # (labelled minor ticks of a short decade overlap)
        if key == "kpr_causal":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of centres
    save_figure(fig, path)
    return True


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                     epilog="row groups: " + ", ".join(ROWS))
    parser.add_argument("--out", default="outputs", help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes (for the test-suite)")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated row groups: " + ", ".join(ROWS))
    parser.add_argument("--page", default=None, help="rewrite the generated tables of this page "
                        "(docs/reproductions.md)")
    parser.add_argument("--from-dataset", default=None, help="render --page from this dataset instead of running")
    parser.add_argument("--figures", default=None, help="with --from-dataset: redraw the gallery figures into this "
                        "folder")
    args = parser.parse_args(argv)
    if args.from_dataset:
        ds = xr.load_dataset(args.from_dataset)
        page.write_page(ds, pathlib.Path(args.page or "docs/reproductions.md"))
        if args.figures:
            G.gallery(ds, pathlib.Path(args.figures))
        return ds, []
    keys = [k for k in args.rows.split(",") if k]
    unknown = sorted(set(keys) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose among {list(ROWS)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp, start, load0 = tree(), time.perf_counter(), os.getloadavg()[0]  # (read before anything is written)
    rows = run_rows(keys, args.quick)
    command = "python examples/reproductions.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load = f"{load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    ds = to_dataset(rows, args.quick, command, time.perf_counter() - start, stamp, load)
    ds.to_netcdf(out / "reproductions.nc")
    (out / "reproductions.md").write_text(page.render(ds) + "\n")
    print(page.render(ds))
    if not figure(ds, out / "reproductions.png"):
        print("no figure: none of the rows run has a panel (" + ", ".join(p[0] for p in PANELS) + ")")
    G.gallery(ds, out)
    if args.page:
        page.write_page(ds, pathlib.Path(args.page))
    return ds, rows


if __name__ == "__main__":
    main()
