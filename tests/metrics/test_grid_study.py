"""A study over any grid: the settings declare the axes, each cell gets the typed settings of its point.

The study below (the first time two of n uniform tokens come within eps, located by an event, over β and n) is
written as docs/guide/studies.md's: its cells are keyed by the model they run (not by run_sweep's defaults), a
store resumes them, the Dataset's coordinates carry long names and units, no attr repeats a coordinate and
``ds.attn.plot()`` draws it over its grid.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from metrics import extend as kit
from metrics._studies import grid
from particles import MultiHead
from particles.events import min_distance
from particles.validation import Instance, Integer, Interval

POSITIVE = Interval(0, None, closed="neither")
SEEN = []  # (point, beta of the cell's model, type of its settings) of the cells run in this process


@dataclasses.dataclass(frozen=True)
class MergeSettings(kit.StudySettings):
    model: MultiHead = kit.setting(Instance(MultiHead), key=True)
    _: dataclasses.KW_ONLY
    beta: tuple = kit.setting(Interval(0), (0.5, 2.0), axis=True)
    n: tuple = kit.setting(Integer(2), (4, 6), axis="number of tokens")
    n_seeds: int = kit.setting(Integer(1), 2)
    eps: float = kit.setting(POSITIVE, 0.05, key=True)
    t1: float = kit.setting(POSITIVE, 30.0)
    seed: int = kit.setting(Integer(0), 0)


def merge_cell(point: dict, seed_index: int, s: MergeSettings, entropy) -> xr.Dataset:
    SEEN.append((dict(point), s.model.beta, s.n, type(s)))
    x0 = particles.sample_uniform(s.n, d=s.model.d, rng=np.random.SeedSequence(entropy, spawn_key=(seed_index,)))
    traj = simulate(x0, s.model, t1=s.t1, method="dopri5", rtol=1e-8, atol=1e-10,
                    events=min_distance(s.eps, terminal=True), progress=False)
    hit = traj.t_events[0]
    return xr.Dataset({"t_merge": ((), float(hit[0]) if len(hit) else np.nan,
                                   {"long_name": "first merge time", "units": "1"})})


simulate = particles.simulate
MERGE = kit.Study(name="first_merge_study", kind="first_merge", label="first merge", cell=merge_cell)


@kit.study_function(MergeSettings, {"store": None, "progress": False, "engine": "serial", "max_workers": None})
def first_merge_study(s: MergeSettings, **run) -> xr.Dataset:
    t_start = time.perf_counter()
    ds = MERGE.run(s, **run)
    ds["t_merge_se"] = ds.t_merge.std("seed", ddof=1) / np.sqrt(ds.t_merge.count("seed"))
    ds.attrs = kit.study_attrs(MERGE, s, title="first merge", sweep=ds, spawn_key="(seed index,)", t_start=t_start)
    return ds


SOFTMAX = MultiHead(np.eye(3), beta=1.0, kind="softmax")


def _names(store) -> list:
    return sorted(p.name for p in store.glob("cell_*.nc"))


def test_each_cell_gets_the_typed_settings_of_its_grid_point(tmp_path):
    SEEN.clear()
    ds = first_merge_study(SOFTMAX)
    assert ds.t_merge.dims == ("beta", "n", "seed") and ds.t_merge.shape == (2, 2, 2)
    assert sorted((p["beta"], p["n"], b, n) for p, b, n, _ in SEEN) == sorted(
        (b, n, b, n) for b in (0.5, 2.0) for n in (4, 6) for _ in range(2))
    assert {t for *_, t in SEEN} == {MergeSettings}
    assert np.all(np.isfinite(ds.t_merge)) and np.all(ds.success == 1)
    # coordinates say what they are; no attr repeats one (the model's beta is the beta coordinate)
    assert ds.beta.attrs == {"long_name": "inverse temperature", "units": "1"}
    assert ds.n.attrs == {"long_name": "number of tokens", "units": "1"}
    assert ds.seed.attrs["long_name"].startswith("seed index")
    assert not set(ds.attrs) & set(ds.coords) and json.loads(ds.attrs["grid_axes"]) == ["beta", "n"]
    assert ds.attn.kind == "first_merge" and json.loads(ds.attrs["config"])["beta"] == [0.5, 2.0]
    with pytest.raises(particles.InvalidParameterError, match="one model per point of its grid axes"):
        ds.attn.model  # the attrs hold the model the study was given, not one of the points' models


def test_cells_are_keyed_by_the_model_they_run_and_resume(tmp_path, monkeypatch):
    store = tmp_path / "cells"
    first = first_merge_study(SOFTMAX, n=4, store=store)
    names = _names(store)
    assert len(names) == 4

    def no_run(*a, **k):
        raise AssertionError("a finished cell was recomputed")

    monkeypatch.setattr(sys.modules[__name__], "simulate", no_run)
    again = first_merge_study(SOFTMAX, n=4, store=store)
    xr.testing.assert_identical(again.drop_attrs(), first.drop_attrs())
    monkeypatch.undo()
    # the same study but for d, or for the kind: other cells (the key holds the real model, not run_sweep's
    # defaults kind='softmax', d=3)
    first_merge_study(MultiHead(np.eye(4), beta=1.0, kind="softmax"), n=4, store=store)
    first_merge_study(MultiHead(np.eye(3), beta=1.0, kind="usa"), n=4, store=store)
    assert len(_names(store)) == 12
    # the model's own beta is replaced by the grid's: a model at another beta runs the same cells
    monkeypatch.setattr(sys.modules[__name__], "simulate", no_run)
    first_merge_study(SOFTMAX.replace(beta=7.0), n=4, store=store)


def test_a_key_holds_the_point_the_model_and_the_run():
    s = MergeSettings(SOFTMAX, beta=1.0, n=4)
    point = grid.point_settings(s, {"beta": 2.0, "n": 4}, "test")
    assert point.model.beta == 2.0 and point.beta == 2.0 and s.model.beta == 1.0
    keys = {grid.grid_cell_key(MERGE, p, {"beta": 2.0}, 0, 0) for p in (
        point, dataclasses.replace(point, t1=31.0), dataclasses.replace(point, eps=0.2),
        dataclasses.replace(point, model=point.model.replace(kind="usa")))}
    assert len(keys) == 4


def test_axis_values_follow_the_fields_rule():
    assert MergeSettings(SOFTMAX, beta=2.0).beta == 2.0  # one value: an axis of one point
    with pytest.raises(particles.InvalidParameterError, match="'beta' parameter of first_merge_study"):
        first_merge_study(SOFTMAX, beta=[-1.0, 1.0])
    with pytest.raises(particles.InvalidParameterError, match="distinct"):
        first_merge_study(SOFTMAX, beta=[1.0, 1.0])


def test_plot_draws_the_study_over_its_grid():
    import matplotlib

    matplotlib.use("Agg")
    ds = first_merge_study(SOFTMAX, beta=[0.5, 1.0, 2.0], n=[4, 6])
    (ax,) = ds.attn.plot()
    assert ax.get_xlabel() == "inverse temperature" and len(ax.get_lines()) >= 2  # one line per n
    assert "seed mean" in ax.get_title() and [t.get_text() for t in ax.get_legend().get_texts()] == ["n = 4", "n = 6"]
    # without a seed dim, a variable is drawn with the bars of its _se
    mean = ds.assign(t_mean=ds.t_merge.mean("seed"), t_mean_se=ds.t_merge_se)
    assert len(metrics.plot_study(mean, ["t_mean"])) == 1
    with pytest.raises(particles.InvalidParameterError, match="names"):
        metrics.plot_study(ds, ["success"])


def test_the_cells_run_on_a_process_pool_and_on_dask_as_in_this_process(tmp_path):
    import distributed

    kw = dict(beta=[0.5, 2.0], n=4, n_seeds=1)
    serial = first_merge_study(SOFTMAX, **kw).drop_attrs()
    pooled = first_merge_study(SOFTMAX, engine="process", max_workers=2, store=tmp_path, **kw)
    xr.testing.assert_identical(pooled.drop_attrs(), serial)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0",
                            set_as_default=False) as client:
        xr.testing.assert_identical(first_merge_study(SOFTMAX, engine=client, **kw).drop_attrs(), serial)


def test_the_coordinate_helper_takes_any_axes():
    coords = kit.study_coords({"beta": [0.5, 1.0], "eps": [0.1]}, 3)
    assert list(coords) == ["beta", "eps", "seed"] and len(coords["seed"][1]) == 3
    assert coords["beta"][2] == {"long_name": "inverse temperature", "units": "1"}
    assert coords["eps"][2]["long_name"] == "eps"
    # the (n, seed, time) form of the studies of today, unchanged
    old = kit.study_coords([8, 16], [2, 1], np.linspace(0, 1, 3), log_time_scale=0.0, max_clusters=2)
    assert list(old) == ["n_particles", "seed", "time", "cluster_rank"]
    assert old["n_particles"][2]["long_name"] == "number of tokens" and len(old["seed"][1]) == 2


@dataclasses.dataclass(frozen=True)
class SpreadSettings(kit.StudySettings):
    model: MultiHead = kit.setting(Instance(MultiHead), key=True)
    _: dataclasses.KW_ONLY
    spread: tuple = kit.setting(Interval(0), (0.0, 1.0), axis=True)
    d: tuple = kit.setting(Integer(2), 3, axis=True)


def test_model_axes_go_into_the_model_and_a_model_that_cannot_take_them_is_named():
    heads = MultiHead.scalar([0.5, 1.0, 2.0], d=3, beta=1.0, kind="softmax")
    flat = grid.point_settings(SpreadSettings(heads), {"spread": 0.0, "d": 4}, "my_study")
    assert flat.model.d == 4 and np.allclose(flat.model.M, 7 / 6 * np.eye(4)) and flat.spread == 0.0
    full = MultiHead(np.random.default_rng(0).standard_normal((2, 3, 3)), beta=1.0)
    with pytest.raises(particles.InvalidParameterError, match=r"grid axes \['spread'\] of my_study go into"):
        grid.point_settings(SpreadSettings(full), {"spread": 0.5}, "my_study")
