"""Examples run end to end (quick sizes) and their outputs are complete and consistent."""

import numpy as np
import pytest
import xarray as xr

from tests.helpers import real_model_zip


def test_flagship_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import json

    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path), "--quick"])
    back = xr.open_dataset(tmp_path / "flagship.nc")
    xr.testing.assert_identical(back.load(), ds)
    for name in ("clusters_energy_entropy", "spacetime", "theorem11_residual", "meanfield", "large_n"):
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
    with xr.open_dataset(tmp_path / "flagship_large_n.nc") as big:
        # the large-n run took the fast route at every save, within its bound, and follows the mean field
        assert big.attrs["summation_fast_fraction"] == 1.0
        assert 0 < big.attrs["summation_bound_max"] <= flagship.QUICK["large_n"]["tol"]
        assert float(big.w1_to_meanfield.max()) < 0.05
        E, Emf = big.energy_multi.values, big.energy_meanfield.values
        assert np.all(np.diff(E) > 0) and np.max(np.abs(E / Emf - 1)) < 0.05


@pytest.mark.slow
def test_flagship_full(tmp_path):
    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path)])
    final = ds.n_clusters.isel(time=-1)
    assert float(final.min()) >= 2  # metastable: several clusters survive to t1 ...
    assert float(final.max()) < float(ds.n_particles.min()) / 4  # ... but the tokens did cluster
    with xr.open_dataset(tmp_path / "flagship_meanfield.nc") as mf:
        assert -0.8 < mf.attrs["rate_at_t0"] < -0.3
    with xr.open_dataset(tmp_path / "flagship_large_n.nc") as big:
        # 2e5 tokens: W1 to the mean field at the scale of the grid and of n^-1/2, not of n = 256
        assert float(big.w1_to_meanfield.max()) < 0.02
        assert big.attrs["exact_run_hours_extrapolated"] > 1.0


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


def test_compare_kinds_example(tmp_path):
    from examples import compare_kinds

    rows = {row[0]: row for row in compare_kinds.main(["--out", str(tmp_path), "--quick"])}
    assert sorted(rows) == ["relu", "sigmoid", "sinkhorn", "softmax", "usa"]
    for kind in ("usa", "sigmoid", "sinkhorn"):  # each raises its own energy (symmetric M = W)
        assert rows[kind][4] > rows[kind][3]
    assert rows["usa"][-1] < rows["usa"][-2]  # larger beta, fewer clusters left


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
    with xr.open_dataset(tmp_path / "mean_field_limit_s1.nc") as back:
        xr.testing.assert_identical(back.load(), ds)
    assert (tmp_path / "mean_field_limit_s2.nc").exists() and (tmp_path / "mean_field_limit.png").exists()
    w1 = ds.w1.mean("seed").isel(time=0).values
    assert np.all(np.diff(w1) < 0)  # the gap shrinks as n grows
    # ~ n^{-1/2}: within 4 standard errors (a calibrated t interval misses by that much ~0.3 % of the time)
    r, se = ds.attrs["rate_at_t0"], float(ds.rate_w1_stderr.isel(time=0))
    assert abs(r + 0.5) < 4 * se
    lo, hi = ds.rate_w1_ci.isel(time=0).values
    assert lo <= ds.rate_w1.isel(time=0) <= hi


def test_misalignment_example(tmp_path):
    from examples import misalignment

    rows1, rows2 = misalignment.main(["--out", str(tmp_path), "--quick"])
    for *_, min_rate, gap, uniform, _, residual in rows1:
        assert gap >= -1e-12 and min_rate >= uniform and residual < 1e-12  # Theorem 12 bounds and split
    assert rows1[0][1] == 0 and rows1[0][5] == 1  # aligned values: Theorem 11, always certified
    for *_, gap, slack, _, off in rows2:
        assert gap >= -1e-12 and off <= slack + 1e-12
    assert rows2[0][1] == 0 and rows2[0][3] == pytest.approx(0, abs=1e-12)  # exact at delta = 0
    assert (tmp_path / "misalignment.png").exists() and (tmp_path / "misalignment.md").exists()


def test_radial_dominance_example(tmp_path):
    from examples import radial_dominance

    rows, rep = radial_dominance.main(["--out", str(tmp_path), "--quick"])
    for T, lower, upper, pred, bstar, _ in rows:
        assert lower <= pred + 1e-9 <= upper + 1e-9 and upper <= bstar + 5e-3, T
    assert rows[0][3] == rows[0][4]  # at T = 0 the threshold is beta*
    assert rows[-1][1] < rows[0][1] - 0.1  # a longer run loses radial dominance at a lower beta
    assert np.all(rep.holds["orthogonal"][rep.holds["pointwise"]])  # Condition 8 is the strongest
    assert (tmp_path / "radial_dominance.png").exists() and (tmp_path / "radial_dominance.md").exists()


def test_sphere_stability_example(tmp_path):
    from examples import sphere_stability

    rows = sphere_stability.main(["--out", str(tmp_path), "--quick"])
    for name, measured, predicted, rel in rows:
        assert abs(rel) < (0.02 if "fv_sphere" in name else 1e-5), name
        assert np.sign(measured) == np.sign(predicted)  # both sides of kappa* on S^2
    assert (tmp_path / "sphere_stability.png").exists() and (tmp_path / "sphere_stability.md").exists()


def test_metastability_example(tmp_path):
    from examples import metastability

    steps, cp, expected = metastability.main(["--out", str(tmp_path), "--quick"])
    assert len(steps) >= 2 and np.all(np.diff([s.energy for s in steps]) > 0)
    assert steps[-1].normalised_energy == pytest.approx(steps[-1].sum_sq_masses, rel=1e-3)  # staircase identity
    assert cp.converged and cp.spectrum.index == expected >= 1  # the last plateau is a saddle
    assert (tmp_path / "metastability.png").exists() and (tmp_path / "metastability.md").exists()


def test_variants_example(tmp_path):
    from examples import variants

    rows = {r[0].split(":")[0]: r[1] for r in variants.main(["--out", str(tmp_path), "--quick"])}
    assert rows["causal scalar heads"] == 0.0 and rows["causal USA, C3+C4"] > 0.1
    assert rows["post-LN Euler"] == pytest.approx(2.0, rel=0.15) and rows["nGPT update"] <= 1.0
    assert rows["W(t) = (1 + t) W vs constant run at t + t^2/2"] < 1e-8
    assert rows["3 identical layers vs one run"] < 1e-13
    assert (tmp_path / "variants.png").exists() and (tmp_path / "variants.md").exists()


def test_phase_diagram_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from examples import phase_diagram

    panels, rows = phase_diagram.main(["--out", str(tmp_path), "--quick"])
    for name in ("phase_diagram", "phase_diagram_sharpening"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000, name
    assert (tmp_path / "phase_diagram.md").exists() and all(r[8] == 1 for r in rows)  # every chunk succeeded
    for (kind, d), ds in panels.items():
        with xr.open_dataset(tmp_path / f"phase_diagram_{kind}_d{d}.nc") as back:
            xr.testing.assert_identical(back.load(), ds)
    for kind in ("softmax", "usa"):
        # distance of the measured diagram to the equiangular step 1{t > t*(beta)}: random tokens are
        # nearly orthogonal in high d (<x_i, x_j> ~ d^{-1/2}), so the step is approached as d grows
        gap = [float(abs(panels[kind, d].clustered_pairs - (panels[kind, d].time > panels[kind, d].theory_time))
                     .mean()) for d in (8, 128, 1024)]
        assert gap[0] > gap[1] > gap[2] and gap[2] < 0.02, (kind, gap)
    # softmax at the smallest beta: t*(0.1) ~ 5.3 << T = 30, every system is one cluster at T in every d
    for d in (8, 128, 1024):
        assert float(panels["softmax", d].clustered_pairs.isel(beta=0, time=-1)) == 1.0


def test_periodic_state_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from examples import periodic_state

    r = periodic_state.main(["--out", str(tmp_path), "--quick"])
    assert (tmp_path / "periodic_state.png").stat().st_size > 10_000
    # white noise: n E|c_l(0)|^2 = 1 for every mode (averaged over modes and systems)
    assert 0.75 < float(np.mean(r["power"][0]) * r["n"]) < 1.25
    # the most unstable mode of the linear theory (l = 3 at beta = 5) dominates at T ...
    assert int(np.argmax(r["sigma"])) == 2 and int(np.argmax(r["power"][-1])) == 2
    # ... and the measured rates of the unstable low modes match sigma_l (higher modes are fed
    # by harmonics of the growing ones, e.g. l = 6 by l = 3, so they grow faster than linear theory)
    np.testing.assert_allclose(r["measured"][:5], r["sigma"][:5], rtol=0.1)


def test_metastable_staircase_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from examples import metastable_staircase as ms

    steps, found = ms.main(["--out", str(tmp_path), "--quick"])
    assert (tmp_path / "metastable_staircase.png").exists()
    assert [s.n_clusters for s in steps] == [4, 3, 2] and len(found) == 2
    for f in found:
        assert f["rank"] == 0  # the closest pair of clusters merges first
        assert abs(f["sumsq_jump"] - f["two_ab"]) < 1e-12  # (m_a + m_b)^2 - m_a^2 - m_b^2 = 2 m_a m_b
        # the energy jumps by 2 m_a m_b up to the cross terms of the two plateaus
        assert abs(f["energy_jump"] - f["two_ab"]) <= f["cross"][0] + f["cross"][1] + 1e-3
    for s, f in zip(steps, found):  # each plateau sits at sum m_c^2 plus its cross terms
        assert abs(s.normalised_energy - s.sum_sq_masses - f["cross"][0]) < 2e-3
    assert abs(steps[-1].normalised_energy - steps[-1].sum_sq_masses) < 1e-6  # two far-apart clusters: no cross term
def test_chaos_horizon_quick(tmp_path):
    from examples import chaos_horizon

    ds, stable, s2 = chaos_horizon.main(["--out", str(tmp_path), "--quick"])
    for name in ("s1", "stable", "s2"):
        assert (tmp_path / f"chaos_horizon_{name}.png").stat().st_size > 10_000, name
    with xr.open_dataset(tmp_path / "chaos_horizon_s1.nc") as back:
        xr.testing.assert_identical(back.load(), ds)
    # unstable: every run broke down, t_delta grows with n; stable: none did
    assert np.all(np.isfinite(ds.t_delta)) and float(ds.slope_predicted) > 0
    td = ds.t_delta.mean("seed").values
    assert np.all(np.diff(td, axis=-1) > 0)
    assert np.all(np.isinf(stable.t_delta)) and float(stable.sigma_star) < 0
    assert int(s2.l_star) == 2 and s2.distance.dims == ("n_particles", "seed", "time")
    assert (tmp_path / "chaos_horizon.md").exists() and not list(tmp_path.glob("*.part"))


def test_trained_heads_quick(tmp_path, monkeypatch):
    """MiniLM's heads (installed by the README's test command): the Euler step is the attention output
    of every layer, the report and the two flows are saved and read back identical."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    real_model_zip()
    from examples import trained_heads

    geo, stack, one, agreement = trained_heads.main(["--out", str(tmp_path), "--quick"])
    assert len(agreement) == 6 and max(agreement) < 1e-12
    for name, ds in (("geometry", geo), ("flow_stack", stack), ("flow_layer0", one)):
        with xr.open_dataset(tmp_path / f"trained_heads_{name}.nc") as back:
            xr.testing.assert_identical(back.load(), ds)
    assert stack.layer_index.values.tolist() == [0, 1, 2, 3, 4, 5, 5]
    np.testing.assert_allclose(np.linalg.norm(stack.positions, axis=-1), 1.0, atol=1e-12)
    for name in ("angles", "defects", "flow", "tokens"):
        assert (tmp_path / f"trained_heads_{name}.png").stat().st_size > 10_000, name
    assert "random 32-dim" in (tmp_path / "trained_heads_angles.md").read_text()
