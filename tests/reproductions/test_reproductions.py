"""docs/reproductions.md: one test per row, at the quick sizes of examples/reproductions.py (issue 35).

Every test measures its number with headflow (particle runs, or the library's exact sums) and asserts
it lies within the row's stated uncertainty of the published value; none compares with a number copied
from the table. Rows that link an existing test (BPA, GKPR, GLPR, the noise threshold) are not repeated here.
"""

import numpy as np
import pytest
import xarray as xr

from examples import _reproductions_rows as R
from examples import reproductions as ex
from particles import theory as th


def quick(key):
    fn, _, small = ex.ROWS[key]
    return fn(**small)


# ---------------------------------------------------------------- arXiv:2605.04279
def test_theorem19_golden_ratio_from_the_simulated_cosine():
    row = quick("thm19_golden")
    assert row.measured == pytest.approx((1 + 5**0.5) / 2, abs=1e-12) and row.agrees


def test_theorem19_radial_dominance_is_lost_at_beta_star():
    row = quick("thm19_beta_star")
    assert abs(row.measured - th.beta_star(3, 20, 0.8)) <= row.uncertainty and row.agrees


def test_theorem22_early_rate_of_the_particles():
    row = quick("thm22_early")
    assert abs(row.measured - row.target) <= row.uncertainty
    assert row.target == pytest.approx(float(np.sum(th.phi(np.array([0.5, 1.0, 3.0]), 2.0, 10))), rel=1e-14)


def test_theorem22_late_rate_two_lambda():
    row = quick("thm22_late")
    assert abs(row.measured - 2.0) <= row.uncertainty


def test_theorem25_relu_decade_cost_and_bounded_softmax():
    row = quick("thm25_relu")
    assert abs(row.measured - 4 * np.log(10) / 2) <= row.uncertainty
    assert row.extra["softmax_increment"] < 0.02 * row.measured  # softmax: O(1), not O(n log(1/rho0))


def test_theorem27_entropy_rises_to_log_n():
    row = quick("thm27_entropy")
    assert np.all(np.diff(row.curves["entropy"]) > 0)
    assert abs(row.measured - np.log(5)) <= row.uncertainty


# ---------------------------------------------------------------- Polyanskiy-Rigollet-Yao
def test_negative_beta_is_the_reflected_score_matrix(rng):
    """e^{beta <x,y>} with beta < 0 is M = -I at |beta| with W = I: the circle ODE of the paper."""
    beta, n = -0.7, 9
    theta = rng.uniform(0, 2 * np.pi, n)
    x = np.c_[np.cos(theta), np.sin(theta)]
    v = R.circle_kernel_model(beta).velocity(x)
    omega = v[:, 1] * x[:, 0] - v[:, 0] * x[:, 1]  # d theta_i / dt
    diff = theta[None, :] - theta[:, None]  # theta_j - theta_i
    expected = np.mean(np.exp(beta * np.cos(diff)) * np.sin(diff), axis=1)
    np.testing.assert_allclose(omega, expected, atol=1e-14)


def test_three_cluster_state_turns_stable_at_minus_two_thirds():
    row = quick("pry_nonsync_threshold")
    assert abs(row.measured + 2 / 3) <= row.uncertainty
    g = row.curves["growth"]
    assert np.all(g[row.curves["beta"] < -0.7] < 0) and np.all(g[row.curves["beta"] > -0.63] > 0)


def test_three_clusters_persist_below_and_dissolve_above_the_threshold():
    row = quick("pry_basin")
    assert row.extra["stays"] == [1.0, 0.0] and row.agrees  # beta = -1 stays, beta = -0.5 synchronises


def test_synchronisation_at_beta_minus_0_16():
    row = quick("pry_sync")
    assert row.measured == 1.0 and row.extra["runs"] >= 2


# ---------------------------------------------------------------- Chen-Lin-Polyanskiy-Rigollet
def test_critical_gamma_is_one_over_one_minus_rho():
    row = quick("clpr_gamma_c")
    c = row.curves
    np.testing.assert_allclose(c["gamma_cross"], c["gamma_finite_n"], rtol=1e-9)  # the exact finite-n crossing
    assert np.all(np.diff(c["gamma_cross"]) > 0) and abs(row.measured - row.target) <= row.uncertainty < 1e-3


# ---------------------------------------------------------------- long-context scaling
@pytest.mark.parametrize("key", ["long_context_d3", "long_context_d4"])
def test_long_context_critical_beta_scales_like_n_to_two_over_d_minus_one(key):
    row = quick(key)
    assert abs(row.measured - row.target) <= max(row.uncertainty, 0.1)
    assert abs(row.measured - row.target) < 0.25  # and the bootstrap band itself is informative


# ---------------------------------------------------------------- measure-to-measure interpolation
def test_cap_collapses_and_time_to_eps_is_logarithmic():
    row = quick("grr_cap")
    assert row.measured < 0.05 and row.agrees
    # t(eps) = a + b log(1/eps): a straight line to 1e-3 in time, slope = 1/rate = 1 for softmax heads
    assert row.extra["max_residual"] < 1e-2 and row.extra["slope"] == pytest.approx(1.0, abs=0.05)


# ---------------------------------------------------------------- Post-LN vs Pre-LN
def test_post_ln_exponential_pre_ln_inverse_square():
    post, pre = quick("norm_rates")
    assert abs(post.measured + 2) <= post.uncertainty and abs(pre.measured + 2) <= pre.uncertainty


# ---------------------------------------------------------------- Karagodin-Polyanskiy-Rigollet
def test_causal_attention_metastable_renyi_centres():
    row = quick("kpr_causal")
    c = row.curves["centres"][0]
    t = list(row.curves["t"])
    # several well separated centres (delta = 4 beta^{-1/2} = 0.5) survive to t = 150: metastability
    assert 3 <= c[t.index(75.0)] <= 2 * np.pi / 0.5 and c[t.index(150.0)] >= 3
    assert c[0] > c[t.index(150.0)]  # the early centres merge


def test_renyi_centres_are_separated_and_cover():
    x = np.c_[np.cos(np.linspace(0, 2 * np.pi, 50, endpoint=False)),
              np.sin(np.linspace(0, 2 * np.pi, 50, endpoint=False))]
    c = R.renyi_centres(x, 0.5)
    cos = x[c] @ x[c].T
    assert np.all(cos[np.triu_indices(len(c), 1)] < np.cos(0.5))
    assert np.all(np.max(x @ x[c].T, axis=1) >= np.cos(0.5))  # every token is within delta of a centre


# ---------------------------------------------------------------- the example
def test_example_writes_dataset_table_and_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ds, rows = ex.main(["--out", str(tmp_path), "--quick", "--rows", "pry_nonsync_threshold,clpr_gamma_c"])
    with xr.open_dataset(tmp_path / "reproductions.nc") as back:
        xr.testing.assert_identical(back.load(), ds)
    assert list(ds.row.values) == ["pry_nonsync_threshold", "clpr_gamma_c"]
    assert ds.agrees.values.tolist() == [1, 1]
    assert (tmp_path / "reproductions.png").stat().st_size > 10_000
    assert "clpr_gamma_c" in (tmp_path / "reproductions.md").read_text()
