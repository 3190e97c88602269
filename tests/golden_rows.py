"""The golden table: a few numbers of the library's main routes, recomputed on any machine.

Each row returns ``(value, stated_error)``: the number and the error the computation itself states
(a step-halving estimate of the time integration, the spectral solver's tail and a tolerance study,
a standard error over seeds or systems). ``tests/golden.json`` keeps the values and errors of one run;
``tests/test_golden.py`` recomputes every row and asks for agreement within

    |new - golden| <= 3 * (stated error of the golden run) + 1e-12 * |golden|,

so bitwise equality is not required, agreement within the stated error is. Regenerate (after a change
that moves a number on purpose, and say so in the CHANGELOG) with ``python -m tests.golden_rows``.
"""

from __future__ import annotations

import json
import pathlib
import warnings

import numpy as np

GOLDEN = pathlib.Path(__file__).with_name("golden.json")


def flagship_energy() -> tuple[float, float]:
    """E_multi at t = 20 of the flagship's heads (USA, lambda = (1, 0.5), beta = 16, S^1, rescaled time), n = 64
    uniform tokens of seed 0, RK4 at dt = 0.05; stated error: the step-halving estimate |E(dt) - E(dt/2)| 16/15."""
    from particles import MultiHead, SaveAt, sample_uniform, simulate

    model = MultiHead.scalar([1.0, 0.5], d=2, beta=16.0, kind="usa", log_time_scale="auto")
    x0 = sample_uniform(64, d=2, rng=0)
    energies = [float(model.energy(simulate(x0, model, t1=20.0, dt=dt, save=SaveAt(ts=[20.0])).x[-1]))
                for dt in (0.05, 0.025)]
    return energies[0], abs(energies[0] - energies[1]) * 16 / 15


def spectral_reference_energy() -> tuple[float, float]:
    """The mean-field energy at t = 1 of the zonal spectral solution from 1 + z/2 on S^2 (one USA head, beta = 2);
    stated error: the spectral tail at t = 1 plus the change under a 100x tighter step tolerance."""
    import meanfield as mf
    from particles import MultiHead

    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    runs = [mf.wasserstein_ascent(mu0, model, t1=1.0, scheme="spectral", rtol=rtol) for rtol in (1e-10, 1e-12)]
    energy = float(np.asarray(runs[0].energy)[-1])
    return energy, float(np.asarray(runs[0].info["tail"])[-1]) + abs(energy - float(np.asarray(runs[1].energy)[-1]))


def phase_diagram_row() -> tuple[float, float]:
    """The fraction of clustered token pairs at beta = 2 (softmax, n = 8 on S^2, 64 systems, t = 3); stated error:
    its standard error over systems (``clustered_pairs_se``)."""
    import metrics

    ds = metrics.phase_diagram([2.0], n=8, d=3, t1=3.0, n_systems=64, n_saves=3, dt=0.1, progress=False)
    last = ds.isel(beta=0, time=-1)
    return float(last.clustered_pairs), float(last.clustered_pairs_se)


def chaos_horizon() -> tuple[float, float]:
    """The mean first time the l* = 1 amplitude reaches delta = 0.2 (softmax, beta = 0.5 on S^1, n = 200 of 200 and 400,
    8 seeds); stated error: its standard error over seeds."""
    import metrics
    from particles import MultiHead

    model = MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a seed that does not reach delta by t1 is NaN and says so
        ds = metrics.chaos_horizon_study(model, n_values=[200, 400], n_seeds=8, t1=9.0, n_saves=61, delta=(0.2,),
                                         dt=0.1, l_max=3, n_boot=50, progress=False)
    td = ds.t_delta.sel(delta=0.2).isel(n_particles=0).values
    td = td[np.isfinite(td)]
    return float(td.mean()), float(td.std(ddof=1) / np.sqrt(len(td)))


ROWS = {f.__name__: f for f in (flagship_energy, spectral_reference_energy, phase_diagram_row, chaos_horizon)}


def write(path=GOLDEN) -> dict:
    """Run every row and write the table (values, stated errors, and what each row is)."""
    table = {}
    for name, fn in ROWS.items():
        value, error = fn()
        table[name] = {"value": value, "stated_error": error, "what": " ".join(fn.__doc__.split())}
    pathlib.Path(path).write_text(json.dumps(table, indent=2) + "\n")
    return table


if __name__ == "__main__":
    print(json.dumps(write(), indent=2))
