"""A 3-periodic state emerging from white noise at beta = 5 on the circle.

The uniform measure on S^1 is a stationary state of the mean-field flow; its Fourier modes
e^{i l theta} grow at the rates sigma_l of the linearised flow (meanfield.growth_rates), and at
beta = 5 the most unstable one is l = 3. n i.i.d. uniform tokens are the uniform measure plus
white noise: every empirical Fourier coefficient c_l = (1/n) sum_j e^{i l theta_j} starts with
E|c_l|^2 = 1/n, so the averaged power P_l(t) = E|c_l(t)|^2 grows like e^{2 sigma_l t} while it is
small, and the l = 3 mode takes over (the Bruno-Pasqualotto-Agazzi picture). The example runs
S independent systems of one softmax head (M = W = I) in one particles.Ensemble, measures
P_l(t), fits the rate of each mode on the linear stretch and compares it with sigma_l.

Run:  python examples/periodic_state.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from meanfield import growth_rates
from particles import Ensemble, MultiHead, SaveAt, simulate

BETA, L_MAX = 5.0, 8
FULL = {"n": 2048, "systems": 64, "t1": 5.0, "dt": 0.05, "n_saves": 26}
QUICK = {"n": 512, "systems": 24, "t1": 4.0, "dt": 0.1, "n_saves": 21}


def fourier_power(x):
    """|c_l|^2 for l = 1..L_MAX of each system, shape (S, L_MAX)."""
    z = x[..., 0] + 1j * x[..., 1]
    return np.stack([np.abs(np.mean(z**l, axis=1)) ** 2 for l in range(1, L_MAX + 1)], axis=1)


def fit_rates(t, power, cap=0.01):
    """Least-squares slope of log P_l(t) / 2 over the saves where P_l <= cap (linear regime)."""
    rates = np.full(power.shape[1], np.nan)
    for l in range(power.shape[1]):
        keep = power[:, l] <= cap
        if keep.sum() >= 3:
            rates[l] = np.polyfit(t[keep], np.log(power[keep, l]), 1)[0] / 2
    return rates


def main(argv=None):
    args, out = parse(__doc__, argv)
    cfg = QUICK if args.quick else FULL
    rng = np.random.default_rng(0)
    theta = rng.uniform(0.0, 2 * np.pi, (cfg["systems"], cfg["n"]))
    x0 = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    ts = np.linspace(0.0, cfg["t1"], cfg["n_saves"])
    ens = Ensemble(np.eye(2), beta=np.full(cfg["systems"], BETA), chunk=8)
    run = simulate(x0, ens, t1=cfg["t1"], dt=cfg["dt"], method="rk4",
                   save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"power": fourier_power(x)}))
    power = run.saved["power"].mean(axis=1)  # (time, l): E|c_l(t)|^2 over systems
    sigma = growth_rates(MultiHead.scalar([1.0], d=2, beta=BETA, kind="softmax"), l_max=L_MAX)[1:]
    measured = fit_rates(ts, power)
    modes = np.arange(1, L_MAX + 1)
    rows = [(int(l), float(s), float(m), float(power[0, l - 1] * cfg["n"]), float(power[-1, l - 1]))
            for l, s, m in zip(modes, sigma, measured)]
    table = write_table(out / "periodic_state.md",
                        ["mode l", "sigma_l (linear theory)", "measured rate", "n E|c_l(0)|^2", "E|c_l(T)|^2"], rows)
    print(table)
    print(f"most unstable mode: {modes[np.argmax(sigma)]}; dominant measured mode at T: "
          f"{modes[np.argmax(power[-1])]}")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for l in modes:
        axes[0].semilogy(ts, power[:, l - 1], label=f"l = {l}", lw=2.5 if l == 3 else 1.0)
    axes[0].set(xlabel="t", ylabel="E|c_l(t)|^2", title=f"Fourier power from white noise, beta = {BETA:g}")
    axes[0].legend(ncol=2, fontsize=7)
    axes[1].plot(modes, sigma, "ko-", label="sigma_l (meanfield.growth_rates)")
    axes[1].plot(modes, measured, "rs", label="measured (fit of log power / 2)")
    axes[1].set(xlabel="mode l", ylabel="growth rate", title="most unstable mode: l = 3")
    axes[1].legend()
    save_figure(fig, out / "periodic_state.png")
    return {"t": ts, "power": power, "sigma": sigma, "measured": measured, "n": cfg["n"]}


if __name__ == "__main__":
    main()
