"""A new study on the Study spec: its cells, key fields and assembly are all a study module writes.

The study below (the energy ascent E_multi(t) of n uniform tokens, one cell per (n, seed)) is a
whole study in the form docs/architecture.md describes: it resumes from a store, its Dataset says
what it is and carries the shared coordinates, cluster variables and provenance, and it checks the
theorem it measures (E_multi never decreases under symmetric, value-aligned heads).
"""

from __future__ import annotations

import dataclasses
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
from metrics._runs.keys import model_key
from metrics._studies import spec
from particles import MultiHead, SaveAt, sample_uniform, simulate
from particles.validation import Function, Instance, Integer, Interval, SequenceOf

# ------------------------------------------------------------------ the study: everything it needs


@dataclasses.dataclass(frozen=True)
class AscentSettings(spec.StudySettings):
    model: MultiHead = spec.setting(Instance(MultiHead), key=True)
    _: dataclasses.KW_ONLY
    n_values: tuple = spec.setting(SequenceOf(Integer(1)), (8, 16))
    n_seeds: int = spec.setting(Integer(1), 2)
    t1: float = spec.setting(Interval(0, None, closed="neither"), 1.0)
    n_saves: int = spec.setting(Integer(2), 5)
    dt: float = spec.setting(Interval(0, None, closed="neither"), 0.05)
    eps: float = spec.setting(Interval(0, None, closed="neither"), 1e-3, key=True)
    seed: int = spec.setting(Integer(0), 0)


def _ascent_cell(params: dict, seed_index: int, s: AscentSettings, entropy) -> xr.Dataset:
    n = int(params["n_particles"])
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_index, n)))

    def save_fn(t, x):
        return {"energy": metrics.energy(x, s.model), **cluster_row(x, eps=s.eps, max_clusters=2)}

    traj = simulate(sample_uniform(n, d=s.model.d, rng=rng), s.model, t1=s.t1, dt=s.dt,
                    save=SaveAt(ts=s.ts, x=False, fn=save_fn), on_failure="return")
    return saved_to_dataset(traj, s.ts)


ASCENT = spec.Study(name="energy_ascent_study", kind="energy_ascent", label="S^{sphere} ascent", cell=_ascent_cell)


@spec.study_function(AscentSettings, {"store": None, "progress": False})
def energy_ascent_study(s: AscentSettings, **run) -> xr.Dataset:
    """E_multi(t) and the clusters of n uniform tokens, per (n, seed)."""
    counts, t_start = spec.seed_counts(s.n_seeds, s.n_values), time.perf_counter()
    sweep = ASCENT.run(s, **run)
    energy = sweep["energy"].values
    data = {"energy": (("n_particles", "seed", "time"), energy, {"long_name": "E_multi(mu_n(t))", "units": "1"}),
            "energy_gain": (("n_particles", "seed"), energy[..., -1] - energy[..., 0],
                            {"long_name": "E_multi(t1) - E_multi(0)", "units": "1"}),
            **spec.cluster_variables(sweep, max_clusters=2, eps=s.eps, counts=counts)}
    coords = spec.study_coords(s.n_values, counts, s.ts, log_time_scale=s.model.log_time_scale, max_clusters=2)
    attrs = spec.study_attrs(ASCENT, s, title="energy ascent", sweep=sweep, t_start=t_start,
                             spawn_key="(seed index, n)")
    return xr.Dataset(data, coords=coords, attrs=attrs)

# ------------------------------------------------------------------ its checks


MODEL = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")


def test_a_study_is_a_settings_table_a_cell_and_an_assembly():
    parts = (AscentSettings, _ascent_cell, energy_ascent_study)
    source = sum(len(inspect.getsource(obj).splitlines()) for obj in parts) + 2
    assert source <= 70  # the whole study above, next to ~200 for one with a reference and rate fits
    # the public function's parameters and declaration come from the settings' table
    params = inspect.signature(energy_ascent_study).parameters
    assert list(params)[:3] == ["model", "n_values", "n_seeds"] and params["eps"].default == 1e-3
    assert params["model"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert params["t1"].kind is inspect.Parameter.KEYWORD_ONLY and "store" in params
    with pytest.raises(particles.InvalidParameterError, match="'eps' parameter of energy_ascent_study"):
        energy_ascent_study(MODEL, eps=-1.0)
    with pytest.raises(particles.InvalidParameterError, match="'eps' parameter of AscentSettings"):
        AscentSettings(MODEL, eps=-1.0)  # the same rule, constructed directly


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
    settings = AscentSettings(MODEL)
    assert settings.key() == {"model": model_key(MODEL), "eps": 1e-3}
    v1 = ASCENT.cell_key(settings)
    v2 = dataclasses.replace(ASCENT, key_version=2).cell_key(settings)
    assert '"key_version"' not in v1 and '"key_version": 2' in v2


@pytest.mark.parametrize("kind", ["trajectory", "sweep"])
def test_datasets_say_what_they_are(kind):
    if kind == "trajectory":
        x0 = particles.sample_uniform(6, d=3, rng=0)
        ds = metrics.trajectory_to_dataset(simulate(x0, MODEL, t1=0.1, dt=0.05, save=SaveAt(x=True)), MODEL)
    else:
        ds = metrics.run_sweep({"n_particles": [4]}, t1=0.1, dt=0.05, n_saves=2, progress=False)
    assert ds.attrs["headflow_kind"] == kind == ds.attn.kind


def _round_trip(ds, path):
    ds.to_netcdf(path)
    return path



@dataclasses.dataclass(frozen=True)
class Marked(spec.StudySettings):
    a: float = spec.setting(Interval(0), 1.0, key=True)
    b: float = spec.setting(Interval(0), 0.0, key="bee", since=True)
    fn: object = spec.setting(Function("a function"), abs, cells=False)


def test_a_settings_field_says_how_it_keys_the_cells_and_whether_they_get_it():
    """``key="name"``: the name it has in the key; ``since``: keyed only when it differs from its default (a
    field added after stores were written keeps their names); ``cells=False``: not sent to the cells."""
    import pickle

    assert Marked().key() == {"a": 1.0} and Marked(b=0.5).key() == {"a": 1.0, "bee": 0.5}
    local = Marked(fn=lambda x: x)
    assert local.for_cells().fn is None and local.fn is not None
    pickle.dumps(local.for_cells())
    with pytest.raises(particles.InvalidParameterError, match="'b' parameter of Marked"):
        Marked(b=-1.0)
