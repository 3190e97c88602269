"""Stores written today keep resuming: the cell file names of every runner are pinned.

A cell's file name is the first 16 hex digits of the SHA-256 of its key (parameters, seed
index, settings, and the runner's own key fields). These names were recorded from stores written
by headflow before the metrics package was split into rooms; a change to a runner that renames
the cells of an unchanged configuration would orphan every existing store, so it must bump the
runner's key version (and this file) on purpose.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import warnings

import numpy as np
import pytest

import metrics
from particles import MultiHead


def _names(store) -> list[str]:
    return sorted(p.name for p in pathlib.Path(store).glob("cell_*.nc"))


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


SHORT = dict(n_seeds=1, t1=0.2, dt=0.1, n_saves=2, progress=False)

CASES = {
    "sweep_default": (lambda s: metrics.run_sweep({"n_particles": [4, 5]}, store=s, **{**SHORT, "n_seeds": 2}),
                      ["cell_32d8ccbfcdd5ee79.nc", "cell_34aa34f57e20a203.nc", "cell_8d450424275c8dc7.nc",
                       "cell_e87294b210c1b786.nc"]),
    "sweep_lambdas": (lambda s: metrics.run_sweep({"beta": [1.0]}, fixed={"lambdas": [1.0, 0.5], "n_particles": 6},
                                                  store=s, **SHORT),
                      ["cell_b24d4aade463343a.nc"]),
    "sweep_model": (lambda s: metrics.run_sweep({"beta": [1.0]}, model_fn=metrics.SweepModel(log_time_scale="auto"),
                                                store=s, **SHORT),
                    ["cell_e4d0c0ffc29ed7c9.nc"]),
    "phase": (lambda s: metrics.phase_diagram([0.0, 1.0], n=4, d=3, t1=2.0, n_systems=4, n_saves=3, dt=0.5, store=s,
                                              progress=False),
              ["cell_26a6184f789a63b1.nc", "cell_bf17ba377356a043.nc"]),
    "phase_merge": (lambda s: metrics.phase_diagram([1.0], n=4, d=3, t1=2.0, n_systems=4, n_saves=3, dt=0.5,
                                                    merge=1e-6, store=s, progress=False),
                    ["cell_8eaa0f6b952e11cc.nc"]),
    "chaos": (lambda s: metrics.chaos_horizon_study(MultiHead.scalar([1.0], 2, beta=0.5, kind="softmax"),
                                                    n_values=[50, 100], n_seeds=2, t1=10.0, n_saves=41, delta=0.4,
                                                    dt=0.1, n_boot=50, store=s, progress=False),
              ["cell_62e53c8afa496919.nc", "cell_a3e43f85a691388a.nc", "cell_a3fca8491f8c92ea.nc",
               "cell_e9960cb8c4785e83.nc"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cell_names_are_pinned(case, tmp_path):
    run, expected = CASES[case]
    _quiet(run, tmp_path / case)
    assert _names(tmp_path / case) == expected


def _limit_study_v1_name(model, ds, *, n, seed_index, t1, dt, n_saves, m_grid, kappa, eps, K, L, Q) -> str:
    """The file name of a limit-study cell under key format 1, written out in full: the study's key
    fields (its reference's energies among them, so a machine whose last digits differ still gets
    its own names right) inside run_sweep's cell key."""
    study_key = json.dumps({"model": metrics.model_attrs(model), "t1": t1, "dt": dt, "n_saves": n_saves,
                            "m_grid": m_grid, "kappa": kappa, "transport": "auto", "n_reference": None, "eps": eps,
                            "K": K, "w2_max_n": 100_000, "sampling": "independent", "L": L, "Q": Q,
                            "reference": ds.attrs["reference"], "density": ds.energy_meanfield.values.tolist()},
                           sort_keys=True, default=str)
    settings = {"entropy": np.random.SeedSequence(0).entropy, "t1": t1, "dt": dt, "method": "rk4", "kappa": kappa,
                "ts": np.linspace(0.0, t1, n_saves).tolist(), "metrics": [],
                "model_fn": "metrics._executors.mean_field_limit_study.model", "cell_key": study_key}
    defaults = {"n_particles": 32, "beta": 1.0, "n_heads": 1, "kind": "softmax", "d": 3}
    blob = json.dumps({"params": {**defaults, "n_particles": n}, "seed": seed_index, "settings": settings},
                      sort_keys=True, default=str)
    return f"cell_{hashlib.sha256(blob.encode()).hexdigest()[:16]}.nc"


def test_limit_study_cell_names_follow_key_format_1(tmp_path):
    model = MultiHead.scalar([1.0], 2, beta=1.0, kind="softmax")
    opts = dict(t1=0.5, dt=0.05, n_saves=3, m_grid=128, kappa=np.inf, eps=1e-3, K=8, L=256, Q=16384)
    ds = _quiet(metrics.mean_field_limit_study, model, metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th)),
                n_values=[8, 16], n_seeds=1, t1=opts["t1"], dt=opts["dt"], n_saves=opts["n_saves"],
                m_grid=opts["m_grid"], store=tmp_path, progress=False)
    expected = sorted(_limit_study_v1_name(model, ds, n=n, seed_index=0, **opts) for n in (8, 16))
    assert _names(tmp_path) == expected
