"""Published results reproduced: the measured numbers of docs/reproductions.md, one row per statement.

Each row runs one measurement of examples/_reproductions_rows.py (closed forms of arXiv:2605.04279 against
particle runs; Polyanskiy-Rigollet-Yao's synchronisation thresholds on the circle; Chen-Lin-Polyanskiy-
Rigollet's critical gamma; the long-context scaling n^{2/(d-1)}; measure-to-measure interpolation from a
cap; Post-LN and Pre-LN collapse rates; Karagodin-Polyanskiy-Rigollet's causal metastable clusters) and
reports measured +- uncertainty against the published value, with the verdict computed from them.
Writes reproductions.nc (dim row; every curve of the figure as its own variable), reproductions.md (the
table) and reproductions.png.

Run:  python examples/reproductions.py --out outputs                  (full sizes, about 10 minutes on one core)
      python examples/reproductions.py --out outputs --quick          (the test sizes)
      python examples/reproductions.py --out outputs --rows kpr_causal (one row; keys in ROWS)
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import xarray as xr

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples import _reproductions_rows as R
from examples._common import pyplot, save_figure, write_table

#: row group -> (function, full-size arguments, quick arguments); the quick ones are tests/reproductions'
ROWS = {
    "thm19_golden": (R.theorem19_cosine, {}, {}),
    "thm19_beta_star": (R.theorem19_beta_star, {}, {}),
    "thm22_early": (R.theorem22_early_rate, {}, {}),
    "thm22_late": (R.theorem22_late_rate, {}, {}),
    "thm25_relu": (R.theorem25_relu, {"n": 6}, {"n": 4}),
    "thm27_entropy": (R.theorem27_entropy, {}, {}),
    "pry_nonsync_threshold": (R.pry_threshold, {"k": 6}, {"k": 2}),
    "pry_basin": (R.pry_basin, {"betas": (-2.0, -1.0, -0.6, -0.5), "k": 10, "seeds": 8},
                  {"k": 3, "seeds": 1, "t1": 120.0}),
    "pry_sync": (R.pry_sync, {"betas": (-0.16, 0.5, 1.0, 2.0), "n": 32, "seeds": 8, "t1": 400.0},
                 {"n": 12, "seeds": 2, "t1": 100.0}),
    "clpr_gamma_c": (R.clpr_gamma_c, {"ns": (10, 100, 1000, 2000)}, {"ns": (10, 100, 300)}),
    "long_context_d3": (R.long_context, {"d": 3, "ns": (1000, 10000, 100000), "draws": 40}, {}),
    "long_context_d4": (R.long_context, {"d": 4, "ns": (1000, 10000, 100000), "draws": 40},
                        {"d": 4, "ns": (3000, 30000), "draws": 12}),
    "grr_cap": (R.grr_cap, {"t1": 60.0}, {"t1": 20.0}),
    "norm_rates": (R.norm_rates, {}, {"t_pre": (100.0, 1000.0)}),
    "kpr_causal": (R.kpr_causal, {"n": 200, "seeds": 16}, {"n": 64, "seeds": 1}),
}


def run_rows(keys, quick: bool) -> list:
    """The rows of ``keys`` (a group may give two rows) at quick or full sizes."""
    out = []
    for key in keys:
        fn, full, small = ROWS[key]
        res = fn(**(small if quick else full))
        out.extend(res if isinstance(res, tuple) else (res,))
    return out


def to_dataset(rows, quick: bool) -> xr.Dataset:
    """One entry per row along dim ``row``; each curve ``<row>__<name>`` on dims ``<row>__len<size>``."""
    keys = [r.key for r in rows]
    ds = xr.Dataset(
        {
            "measured": ("row", [r.measured for r in rows], {"long_name": "headflow's measured number"}),
            "uncertainty": ("row", [r.uncertainty for r in rows], {"long_name": "stated uncertainty of measured"}),
            "target": ("row", [r.target for r in rows], {"long_name": "published value"}),
            "agrees": ("row", np.array([int(r.agrees) for r in rows], dtype=np.int8),
                       {"long_name": "1 when the measurement agrees with the published statement"}),
        },
        coords={"row": ("row", keys, {"long_name": "statement key of docs/reproductions.md"})},
        attrs={"quick": int(quick), "extras": json.dumps({r.key: r.extra for r in rows}, default=float)},
    )
    for r in rows:
        for name, val in r.curves.items():
            val = np.asarray(val, dtype=float)
            dims = [f"{r.key}__len{size}" for size in val.shape]  # curves of one row share dims by length
            ds[f"{r.key}__{name}"] = (dims, val, {"long_name": f"{name} of row {r.key}"})
    return ds


def table(rows) -> tuple[list[str], list[tuple]]:
    header = ["row", "measured", "uncertainty", "published", "verdict", "extra"]
    body = [(r.key, r.measured, r.uncertainty, r.target, "agrees" if r.agrees else "disagrees",
             json.dumps(r.extra, default=lambda v: round(float(v), 6))) for r in rows]
    return header, body


def figure(rows, path) -> None:
    by = {r.key: r for r in rows}
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5))
    panels = [
        ("pry_nonsync_threshold", "beta", "growth", "PRY: 3-cluster growth rate vs beta", "beta", "largest rate"),
        ("long_context_d3", "n", "beta_star", "long context: beta*_n, top weight 1/2", "n", "beta*"),
        ("grr_cap", "t", "diameter", "cap 0.4 pi on S^3, n = 60, beta = 4", "t", "diameter"),
        ("post_ln_rate", "t", "one_minus_rho", "Post-LN: 1 - rho ~ e^{-2t}", "t", "1 - rho"),
        ("pre_ln_power", "t", "one_minus_rho", "Pre-LN: 1 - rho ~ t^{-2}", "t", "1 - rho"),
        ("kpr_causal", "t", "centres", "KPR causal, beta = 64: Renyi centres", "t", "centres"),
    ]
    for ax, (key, xn, yn, title, xl, yl) in zip(axes.flat, panels):
        ax.set(title=title, xlabel=xl, ylabel=yl)
        if key not in by:
            ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)
            continue
        x, y = by[key].curves[xn], np.atleast_2d(by[key].curves[yn])
        for yy in y:
            ax.plot(x, yy, "o-" if key != "kpr_causal" else "-", ms=3, alpha=1.0 if len(y) == 1 else 0.4)
        if key == "pry_nonsync_threshold":
            ax.axvline(-2 / 3, color="k", ls=":", label="-2/3")
            ax.axhline(0, color="gray", lw=0.5)
            ax.legend()
        if key in ("long_context_d3", "pre_ln_power"):
            ax.set(xscale="log", yscale="log")
        if key in ("grr_cap", "post_ln_rate"):
            ax.set(yscale="log")
    if "long_context_d4" in by:
        c = by["long_context_d4"].curves
        axes[0, 1].plot(c["n"], c["beta_star"], "s-", ms=3, label="d = 4")
        axes[0, 1].legend(["d = 3", "d = 4"])
    save_figure(fig, path)


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", default="outputs", help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes (for the test-suite)")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated row groups (keys of ROWS)")
    args = parser.parse_args(argv)
    keys = [k for k in args.rows.split(",") if k]
    unknown = sorted(set(keys) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose among {list(ROWS)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = run_rows(keys, args.quick)
    ds = to_dataset(rows, args.quick)
    ds.to_netcdf(out / "reproductions.nc")
    print(write_table(out / "reproductions.md", *table(rows)))
    figure(rows, out / "reproductions.png")
    return ds, rows


if __name__ == "__main__":
    main()
