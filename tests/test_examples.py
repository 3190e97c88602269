"""Examples run end to end (quick sizes) and their outputs are complete and consistent."""

import numpy as np
import pytest
import xarray as xr


def test_flagship_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import json

    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path), "--quick"])
    back = xr.open_dataset(tmp_path / "flagship.nc")
    xr.testing.assert_identical(back.load(), ds)
    for name in ("clusters_energy_entropy", "spacetime", "theorem11_residual", "meanfield"):
        assert (tmp_path / f"flagship_{name}.png").stat().st_size > 10_000, name
    assert not list(tmp_path.glob("*.part"))
    assert ds.sizes["seed"] >= 2 and ds.sizes["n_particles"] >= 2  # error bars over seeds
    assert json.loads(ds.attrs["config"]) == json.loads(json.dumps(flagship.QUICK))
    # Theorem 11 along each run: energy non-decreasing (to the dopri5 tolerance), identity to round-off
    E = ds.energy_multi.values
    assert np.all(np.diff(E, axis=-1) >= -1e-9 * E[..., -1:])
    assert float((np.abs(ds.rate_residual) / ds.kinetic.max("time")).max()) < 1e-12
    assert float((ds.mean_entropy - ds.entropy_max).max()) <= 1e-12
    with xr.open_dataset(tmp_path / "flagship_meanfield.nc") as mf:
        assert mf.w1.dims == ("n_particles", "seed", "time") and "energy_meanfield" in mf
        w1 = mf.w1.isel(time=0).mean("seed").values
        assert w1[-1] < w1[0]  # more tokens, closer to the mean field


@pytest.mark.slow
def test_flagship_full(tmp_path):
    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path)])
    final = ds.n_clusters.isel(time=-1)
    assert float(final.min()) >= 2  # metastable: several clusters survive to t1 ...
    assert float(final.max()) < float(ds.n_particles.min()) / 4  # ... but the tokens did cluster
    with xr.open_dataset(tmp_path / "flagship_meanfield.nc") as mf:
        assert -0.8 < mf.attrs["w1_rate_at_t0"] < -0.3


def test_critical_beta_example(tmp_path):
    from examples import critical_beta

    rows = critical_beta.main(["--out", str(tmp_path), "--quick"])
    for H, bstar, cos_sim, cstar, gap, below, above in rows:
        assert bstar > 0 and cstar == pytest.approx(cos_sim, abs=1e-12), H
        assert gap < 1e-12 and below > 0 > above
    assert (tmp_path / "critical_beta.png").exists() and (tmp_path / "critical_beta.md").exists()


def test_equiangular_example(tmp_path):
    from examples import equiangular

    rows = equiangular.main(["--out", str(tmp_path), "--quick"])
    assert len(rows) == 5 and max(r[-1] for r in rows) < 1e-9


def test_heterogeneous_heads_example(tmp_path):
    from examples import heterogeneous_heads

    rows = heterogeneous_heads.main(["--out", str(tmp_path), "--quick"])
    early = [r for r in rows if r[0] == "early rate"]
    np.testing.assert_allclose([r[2] for r in early], [r[3] for r in early], rtol=1e-10)
    assert all(r[4] > 0 for r in early[1:]) and np.all(np.diff([r[2] for r in early]) > 0)
    unequal, equal = [r for r in rows if r[0] == "hitting time"]
    assert unequal[4] > 1e-3 and abs(equal[4]) < 1e-4  # strict iff the heads differ
    late = [r for r in rows if r[0] == "late rate"][0]
    assert abs(late[4]) < 1e-3 * late[3]


def test_relu_vs_softmax_example(tmp_path):
    from examples import relu_vs_softmax

    rows, slope = relu_vs_softmax.main(["--out", str(tmp_path), "--quick"])
    (r1, Tr1, _, Ts1, _), (r2, Tr2, _, Ts2, _) = rows
    assert Tr2 - Tr1 > 0.8 * 3 * np.log(10)  # ReLU: each decade of rho0 costs ~ n ln10 / (2 beta)
    assert Ts2 - Ts1 < 0.1 * (Tr2 - Tr1)  # softmax: bounded


def test_entropy_example(tmp_path):
    from examples import entropy

    rows = entropy.main(["--out", str(tmp_path), "--quick"])
    vals = {r[1]: r[2] for r in rows}
    assert vals["max |FD - prediction|"] < 1e-7
    assert vals["max |H particles - H(rho)|"] < 1e-10 and vals["monotone rise"] == 1


def test_meanfield_runs_example(tmp_path):
    from examples import meanfield_runs

    rows = {r[0]: r for r in meanfield_runs.main(["--out", str(tmp_path), "--quick"])}
    for name in ("S^1 fv_circle", "S^1 jko", "S^2 jko", "S^2 fv_sphere"):
        _, mass_err, min_mass, rising, _ = rows[name]
        assert mass_err < 1e-13 and min_mass >= 0 and rising == 1
    for factor, unstable in (("0.5", 0), ("2", 1)):
        _, rate, sigma, flag, _ = rows[f"noisy S^1, kappa = {factor} kappa*"]
        assert flag == unstable and rate == pytest.approx(sigma, rel=0.02)


def test_mean_field_limit_example(tmp_path):
    from examples import mean_field_limit

    ds = mean_field_limit.main(["--out", str(tmp_path), "--quick"])
    with xr.open_dataset(tmp_path / "mean_field_limit.nc") as back:
        xr.testing.assert_identical(back.load(), ds)
    w1 = ds.w1.mean("seed").isel(time=0).values
    assert np.all(np.diff(w1) < 0)  # the gap shrinks as n grows
    assert -0.9 < ds.attrs["w1_rate_at_t0"] < -0.3  # ~ n^{-1/2} (few seeds, small n)
