"""A new study on the Study spec: its cells, key fields and assembly are all a study module writes.

The study below (the energy ascent E_multi(t) of n uniform tokens, one cell per (n, seed)) is a
whole study in the form docs/architecture.md describes: it resumes from a store, its Dataset says
what it is and carries the shared coordinates, cluster variables and provenance, and it checks the
theorem it measures (E_multi never decreases under symmetric, value-aligned heads).
"""

from __future__ import annotations

import inspect
import sys
import time

import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from metrics._observables.clustering import cluster_row
from metrics._runs.cells import saved_to_dataset
from metrics._studies import spec
from particles import MultiHead, SaveAt, sample_uniform, simulate

# ------------------------------------------------------------------ the study: everything it needs


def _ascent_cell(params: dict, seed_index: int, settings: dict) -> xr.Dataset:
    n, model, ts = int(params["n_particles"]), settings["model"], settings["ts"]
    rng = np.random.default_rng(np.random.SeedSequence(settings["entropy"], spawn_key=(seed_index, n)))

    def save_fn(t, x):
        return {"energy": metrics.energy(x, model), **cluster_row(x, eps=settings["eps"], max_clusters=2)}

    traj = simulate(sample_uniform(n, model.d, rng), model, t1=settings["t1"], dt=settings["dt"],
                    save=SaveAt(ts=ts, x=False, fn=save_fn), on_failure="return")
    return saved_to_dataset(traj, ts)


ASCENT = spec.Study(name="energy_ascent_study", kind="energy_ascent", label="S^{sphere} ascent", cell=_ascent_cell,
                    key=lambda s: {"model": metrics.model_attrs(s["model"]), "eps": s["eps"]})


def energy_ascent_study(model, *, n_values=(8, 16), n_seeds=2, t1=1.0, n_saves=5, dt=0.05, eps=1e-3, seed=0,
                        store=None, progress=False) -> xr.Dataset:
    counts, ts, t_start = spec.seed_counts(n_seeds, n_values), np.linspace(0.0, t1, n_saves), time.perf_counter()
    settings = {"model": model, "ts": ts, "t1": t1, "dt": dt, "eps": eps}
    sweep = ASCENT.run(model, n_values, counts, settings, seed=seed, t1=t1, dt=dt, n_saves=n_saves, store=store,
                       progress=progress)
    energy = sweep["energy"].values
    data = {"energy": (("n_particles", "seed", "time"), energy, {"long_name": "E_multi(mu_n(t))", "units": "1"}),
            "energy_gain": (("n_particles", "seed"), energy[..., -1] - energy[..., 0],
                            {"long_name": "E_multi(t1) - E_multi(0)", "units": "1"}),
            **spec.cluster_variables(sweep, 2, eps, counts)}
    coords = spec.study_coords(n_values, counts, ts, model.log_time_scale, 2)
    attrs = spec.study_attrs(ASCENT, title="energy ascent", model=model, sweep=sweep, seed=seed, t_start=t_start,
                             config={"n_values": list(n_values), "t1": t1, "dt": dt}, spawn_key="(seed index, n)")
    return xr.Dataset(data, coords=coords, attrs=attrs)

# ------------------------------------------------------------------ its checks


MODEL = MultiHead.scalar([1.0, 0.5], 3, beta=2.0, kind="softmax")


def test_a_study_is_a_cell_its_key_fields_and_an_assembly():
    source = sum(len(inspect.getsource(obj).splitlines()) for obj in (_ascent_cell, energy_ascent_study)) + 2
    assert source <= 60  # the whole study above, next to ~150 for one with a reference and rate fits


def test_the_new_study_measures_its_theorem_and_says_what_it_is(tmp_path):
    ds = energy_ascent_study(MODEL, store=tmp_path / "cells")
    assert ds.attrs["headflow_kind"] == "energy_ascent" and ds.attrs["history"].startswith(
        "created by metrics.energy_ascent_study")
    # E_multi rises along the flow (symmetric, value-aligned heads): every run, every save interval
    assert np.all(np.diff(ds.energy.values, axis=-1) >= -1e-12)
    assert np.all(ds.energy_gain > 0)
    assert ds.cluster_mass.sum("cluster_rank").max() <= 1 + 1e-12 and set(ds.success.values.ravel()) == {1}
    back = xr.open_dataset(_round_trip(ds, tmp_path / "ascent.nc"))
    xr.testing.assert_identical(back.load(), ds)
    assert ds.time.attrs["long_name"] == "time" and ds.n_particles.attrs["long_name"] == "number of tokens"
    assert "bound" not in ds.coords  # no intervals fitted, no interval coordinate


def test_the_new_study_resumes_from_its_store(tmp_path, monkeypatch):
    first = energy_ascent_study(MODEL, store=tmp_path)
    cells = sorted(p.name for p in tmp_path.glob("cell_*.nc"))
    assert len(cells) == 4

    def no_run(*a, **k):
        raise AssertionError("a finished cell was recomputed")

    monkeypatch.setattr(sys.modules[__name__], "simulate", no_run)
    again = energy_ascent_study(MODEL, store=tmp_path)
    np.testing.assert_array_equal(again.energy.values, first.energy.values)
    # a key field changed: other cells, the old ones left in place
    monkeypatch.undo()
    energy_ascent_study(MODEL, store=tmp_path, eps=1e-2)
    assert len(list(tmp_path.glob("cell_*.nc"))) == 8


def test_key_versions_after_the_first_enter_the_key():
    import dataclasses

    settings = {"model": MODEL, "eps": 1e-3}
    v1 = ASCENT.cell_key(settings)
    v2 = dataclasses.replace(ASCENT, key_version=2).cell_key(settings)
    assert '"key_version"' not in v1 and '"key_version": 2' in v2


@pytest.mark.parametrize("kind", ["trajectory", "sweep"])
def test_datasets_say_what_they_are(kind):
    if kind == "trajectory":
        x0 = particles.sample_uniform(6, 3, 0)
        ds = metrics.trajectory_to_dataset(simulate(x0, MODEL, t1=0.1, dt=0.05, save=SaveAt(x=True)), MODEL)
    else:
        ds = metrics.run_sweep({"n_particles": [4]}, t1=0.1, dt=0.05, n_saves=2, progress=False)
    assert ds.attrs["headflow_kind"] == kind == ds.attn.kind


def _round_trip(ds, path):
    ds.to_netcdf(path)
    return path
