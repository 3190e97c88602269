"""Stores written today keep resuming: the cell file names of every runner are pinned.

A cell's file name is the first 16 hex digits of the SHA-256 of its key (parameters, seed
index, settings, and the runner's own key fields). These names were recorded from stores written
by headflow before the metrics package was split into rooms; a change to a runner that renames
the cells of an unchanged configuration would orphan every existing store, so it must bump the
runner's key version (and this file) on purpose.
"""

from __future__ import annotations

import dataclasses
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
    "chaos": (lambda s: metrics.chaos_horizon_study(MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax"),
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
    fields (its reference's energies among them) inside run_sweep's cell key."""
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


LIMIT_OPTS = dict(t1=0.5, dt=0.05, n_saves=3, m_grid=128, kappa=np.inf, eps=1e-3, K=8, L=256, Q=16384)


def _density(th):
    return 1 + 0.5 * np.cos(th)


def _limit(store, model=None, density=_density):
    model = model or MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    return _quiet(metrics.mean_field_limit_study, model, metrics.density_of_angle(density), n_values=[8, 16],
                  n_seeds=1, t1=LIMIT_OPTS["t1"], dt=LIMIT_OPTS["dt"], n_saves=LIMIT_OPTS["n_saves"],
                  m_grid=LIMIT_OPTS["m_grid"], store=store, progress=False)


def test_limit_study_cell_names_are_pinned_in_key_format_2(tmp_path):
    """Format 2 holds the density by its rounded values at the probe points, not the reference's energies
    (a solver's output): these names are the same on every machine."""
    _limit(tmp_path)
    assert _names(tmp_path) == ["cell_5eebda017603f745.nc", "cell_81d3fbb3b6ed6eb0.nc"]


def test_a_format_1_store_is_migrated_once_not_recomputed(tmp_path, monkeypatch):
    """A store written under key format 1 (today's release) resumes: its cells are renamed to format 2 with
    a message, their values kept, and no cell runs again."""
    from metrics._studies import limit

    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    v1 = dataclasses.replace(limit.LIMIT, key=limit._limit_key_v1, key_version=1, legacy_key=None)
    monkeypatch.setattr(limit, "LIMIT", v1)
    first = _limit(tmp_path, model)
    expected_v1 = sorted(_limit_study_v1_name(model, first, n=n, seed_index=0, **LIMIT_OPTS) for n in (8, 16))
    assert _names(tmp_path) == expected_v1
    monkeypatch.undo()

    def no_cell(*args, **kwargs):
        raise AssertionError("a migrated cell was recomputed")

    monkeypatch.setattr(limit, "LIMIT", dataclasses.replace(limit.LIMIT, cell=no_cell))
    with pytest.warns(metrics.StoreMigrationWarning, match="2 cell file"):
        again = metrics.mean_field_limit_study(model, metrics.density_of_angle(_density), n_values=[8, 16],
                                               n_seeds=1, t1=0.5, dt=0.05, n_saves=3, m_grid=128, store=tmp_path,
                                               progress=False)
    assert _names(tmp_path) == ["cell_5eebda017603f745.nc", "cell_81d3fbb3b6ed6eb0.nc"]
    for name in ("w1", "energy_gap", "n_clusters"):
        np.testing.assert_array_equal(again[name].values, first[name].values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second resume finds today's names: no message
        _limit(tmp_path, model)


def _ulp(x):
    return np.nextafter(np.asarray(x, dtype=np.float64), np.inf)


def test_names_do_not_move_when_a_derived_float_moves_by_one_ulp(tmp_path, monkeypatch):
    """Every float a study derives with a library call (arccos of rho_c, the density's values, the reference's
    energies, an 'auto' log-time scale) moved by one ulp, as another numpy build or CPU may: same names."""
    from metrics._studies import limit, reference

    usa = MultiHead.scalar([1.0], d=2, beta=2.0, kind="usa", log_time_scale="auto")
    runs = {"phase": lambda s: CASES["phase"][0](s), "phase_merge": lambda s: CASES["phase_merge"][0](s),
            "limit": lambda s: _limit(s), "limit_usa": lambda s: _limit(s, usa)}
    before = {}
    for case, run in runs.items():
        run(tmp_path / "a" / case)
        before[case] = _names(tmp_path / "a" / case)
    real_setup = reference.setup_reference

    def shifted_setup(*args, **kwargs):
        out = real_setup(*args, **kwargs)
        out["reference"] = dataclasses.replace(out["reference"], energy=_ulp(out["reference"].energy))
        return out

    monkeypatch.setattr(limit, "setup_reference", shifted_setup)
    real_arccos = np.arccos
    monkeypatch.setattr(np, "arccos", lambda x, *args, **kw: _ulp(real_arccos(x, *args, **kw)))
    usa_shifted = MultiHead.scalar([1.0], d=2, beta=2.0, kind="usa", log_time_scale=float(_ulp(usa.log_time_scale)))
    runs.update({"limit": lambda s: _limit(s, density=lambda th: _ulp(_density(th))),
                 "limit_usa": lambda s: _limit(s, usa_shifted, density=lambda th: _ulp(_density(th)))})
    for case, run in runs.items():
        run(tmp_path / "b" / case)
        assert _names(tmp_path / "b" / case) == before[case], case
    assert before["phase"] == CASES["phase"][1] and before["phase_merge"] == CASES["phase_merge"][1]


def test_a_cached_reference_of_the_earlier_key_is_migrated(tmp_path):
    """A cached reference named by the density's raw bytes (format 1) is renamed once under the rounded
    density key, its data kept; an unrelated file stays."""
    import xarray as xr

    from metrics._runs.keys import density_key
    from metrics._runs.store import migrate_reference, reference_path

    rho = 1 + 0.5 * np.cos(np.linspace(0, 2 * np.pi, 16, endpoint=False))
    key = {"m_grid": 16, "density_on_grid": density_key(rho)}
    legacy = json.dumps({**key, "density_on_grid": hashlib.sha256(rho.tobytes()).hexdigest()}, sort_keys=True)
    xr.Dataset({"energy": ("time", [1.0, 2.0])}, attrs={"reference_key": legacy}).to_netcdf(
        reference_path(tmp_path, legacy))
    with pytest.warns(metrics.StoreMigrationWarning, match="cached reference"):
        assert migrate_reference(key, rho, tmp_path) == key
    text = json.dumps(key, sort_keys=True)
    assert not reference_path(tmp_path, legacy).exists()
    with xr.open_dataset(reference_path(tmp_path, text)) as back:
        assert back.attrs["reference_key"] == text and back.energy.values.tolist() == [1.0, 2.0]


def test_exact_arccos_is_correctly_rounded():
    """The key's arccos is the double nearest the exact value (checked at 120 digits) and within a few ulps
    of numpy's, whose last bits depend on the build (numpy 1.24's differs by 2 ulps at some inputs)."""
    from decimal import Decimal, localcontext

    from metrics._runs import keys

    rng = np.random.default_rng(7)
    for x in np.concatenate([rng.uniform(-1, 1, 300), [0.999, 0.5, -0.5, 1e-300, 1 - 2**-52]]):
        with localcontext() as ctx:
            ctx.prec = 120
            y = Decimal(float(abs(x)))
            hi = keys._arccos_nonneg(y) if x >= 0 else keys._pi() - keys._arccos_nonneg(y)
        assert keys.exact_arccos(x) == float(hi)
        assert abs(keys.exact_arccos(x) - np.arccos(x)) <= 4 * np.spacing(np.arccos(x))
    with pytest.raises(ValueError, match=r"x in \[-1, 1\]"):
        keys.exact_arccos(1.5)
