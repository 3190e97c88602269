"""The gallery figures of docs/reproductions.md: each published law drawn from its formula beside headflow's
measurement with its uncertainty band, and, for a limit, the sequence converging to it. Drawn from the dataset
of examples/reproductions.py alone (``python examples/reproductions.py --from-dataset ... --page ...``
redraws them).
"""

from __future__ import annotations

import json

import numpy as np

from examples._common import pyplot, save_figure


def _limit_band(ax, ds, key, x_at_limit):
    r = ds.sel(row=key)
    m, s, p = float(r.measured), float(r.sigma), float(r.predicted)
    ax.axhline(p, color="k", lw=1.2, label="published law")
    ax.errorbar([x_at_limit], [m], yerr=[2 * s], fmt="D", color="C3", capsize=4, label="extrapolated ± 2σ")
    return m, s


def glpr_figure(ds, path) -> bool:
    """Crossing beta against 1/d for both kernels: the d -> infinity value of the equiangular curve t*(beta) = T
    (the published phase boundary), the crossings with 2 sigma bars, the fitted 1/d line and its limit."""
    keys = [k for k in ("glpr_usa", "glpr_softmax") if f"{k}__crossing" in ds]
    if not keys:
        return False
    plt = pyplot()
    extra = json.loads(ds.attrs["extra"])
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.9), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        inv = 1.0 / ds[f"{key}__d"].values
        y, s = ds[f"{key}__crossing"].values, ds[f"{key}__crossing_sigma"].values
        ax.errorbar(inv, y, yerr=2 * s, fmt="o", capsize=3, label="headflow: half the pairs clustered")
        m, _ = _limit_band(ax, ds, key, 0.0)
        u = np.linspace(0.0, inv.max(), 50)
        ax.plot(u, m + extra[key]["a_over_d"] * u, "C3--", lw=1, label="fit β∞ + a/d")
        ax.set(xlabel="1/d", ylabel=r"$\beta$ at the crossing", title=f"GLPR phase boundary, {key.split('_')[1]}")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))  # (1/d down to 1.5e-5: plain ticks overlap)
        ax.legend(fontsize=8)
    save_figure(fig, path)
    return True


def gkpr_figure(ds, path) -> bool:
    """The energy jumps of the first two merges against beta: the published 2 m_a m_b, the measured jumps with
    their definitional spread (2 sigma) and the extrapolated beta -> infinity value."""
    keys = [k for k in ("gkpr_jump1", "gkpr_jump2") if f"{k}__jump" in ds]
    if not keys:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.9), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        b, y, s = (ds[f"{key}__{n}"].values for n in ("beta", "jump", "jump_spread"))
        ax.errorbar(b, y, yerr=2 * s, fmt="o", capsize=3, label="headflow: energy jump")
        ax.plot(b, ds[f"{key}__all_cross_terms"].values, "x", color="C2", label="plateau identity, all cross terms")
        _limit_band(ax, ds, key, b.max() + 0.15 * (b.max() - b.min()))
        ax.set(xlabel=r"$\beta$", ylabel="jump of 2βE/e^β", title=f"GKPR staircase, merge {key[-1]}")
        ax.legend(fontsize=8)
    save_figure(fig, path)
    return True


def kpr_figure(ds, path) -> bool:
    """Renyi centres along causal runs (every seed, the mean and its 2 sigma band), the caption's window
    t in [75, 150] and the measured probability of its event."""
    if "kpr_causal__centres" not in ds:
        return False
    plt = pyplot()
    t, c = ds.kpr_causal__t.values, ds.kpr_causal__centres.values
    r = ds.sel(row="kpr_causal")
    fig, ax = plt.subplots(figsize=(6.2, 3.9))
    for cc in c:
        ax.plot(t, cc + np.random.default_rng(0).uniform(-0.08, 0.08), "-", color="0.7", lw=0.7)
    mean, se = c.mean(axis=0), c.std(axis=0, ddof=1) / np.sqrt(len(c))
    ax.fill_between(t, mean - 2 * se, mean + 2 * se, color="C0", alpha=0.3)
    ax.plot(t, mean, "C0o-", label=f"headflow: mean over {len(c)} seeds ± 2 s.e.")
    ax.axvspan(75, 150, color="C3", alpha=0.1, label="caption: one centre lost in this window")
    ax.set(xlabel="t", ylabel="Rényi centres", title=f"KPR causal, β = 64: P(a centre lost in [75, 150]) = "
           f"{float(r.measured):.2f} ± {float(r.sigma):.2f}")
    ax.legend(fontsize=8)
    save_figure(fig, path)
    return True


#: gallery figure -> function drawing it from the dataset
GALLERY = {"reproductions_glpr.png": glpr_figure, "reproductions_gkpr.png": gkpr_figure,
           "reproductions_kpr.png": kpr_figure}


def gallery(ds, folder) -> list:
    """Draw every gallery figure whose rows are in ``ds`` into ``folder``; the names drawn."""
    return [name for name, draw in GALLERY.items() if draw(ds, folder / name)]
