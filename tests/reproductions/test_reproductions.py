"""docs/reproductions.md: every row group at the quick sizes of examples/reproductions.py.

Each test measures with headflow (particle runs, or the library's exact sums) and checks the row's
computed verdict *and* its control, which repeats the measurement where the statement must fail and
must therefore not come out "agrees": a test that could not tell a true statement from a false one
fails here. None compares with a number copied from the page.
"""

import numpy as np
import pytest
import xarray as xr

from examples import _reproductions_circle as C
from examples import reproductions as ex


def quick(key):
    fn, _, small = ex.ROWS[key]
    rows = fn(**small)
    return [r for r in rows if not r.control_of], [r for r in rows if r.control_of]


#: groups whose rows must agree at the test sizes, and whose controls must disagree
AGREE = ["thm19_golden", "thm19_beta_star", "thm22_early", "thm27_entropy", "clpr_gamma_c", "grr_cap", "thm22_late",
         "thm25_relu", "noise_threshold", "pry_basin", "pry_sync", "long_context_d3", "long_context_d4", "norm_rates"]


@pytest.mark.parametrize("key", AGREE)
def test_row_agrees_and_its_control_disagrees(key):
    rows, controls = quick(key)
    assert rows and all(r.verdict == "agrees" for r in rows), [(r.key, r.measured, r.sigma, r.predicted) for r in rows]
    assert all(np.isfinite(r.sigma) and r.sigma > 0 for r in rows)  # a measured, positive uncertainty
    assert controls and all(c.verdict == "disagrees" for c in controls), [(c.key, c.measured, c.predicted)
                                                                         for c in controls]


def test_long_context_d4_rejects_two_over_d():
    """The d = 4 run must tell 2/(d - 1) = 2/3 from 2/d = 1/2: the alternative lies outside its tolerance."""
    (row,), (control,) = quick("long_context_d4")
    assert abs(row.measured - row.alternative) > row.tolerance and control.predicted == pytest.approx(0.5)


def test_relu_decade_cost_tells_the_exact_integral_from_its_linearisation():
    (row,), (control,) = quick("thm25_relu")
    assert abs(row.measured - row.alternative) > row.tolerance  # the 1 % bias of the linearised time is resolved
    assert control.measured < 0.02 * row.measured  # softmax: O(1), not O(n log(1/rho0))


def test_pry_sync_control_starts_in_the_three_cluster_basin_and_stays_apart():
    rows, (control,) = quick("pry_sync")
    assert control.params["betas"] == [-1.0] and control.extra["per_beta"] == [0.0]
    assert rows[0].extra["per_beta"] == [1.0]  # the same 3-cluster starts synchronise at beta = -0.16


def test_three_cluster_state_turns_stable_at_minus_two_thirds():
    (row,), (control,) = quick("pry_nonsync_threshold")
    assert row.verdict == "agrees" and row.sigma < 1e-6
    assert control.verdict == "disagrees" and control.measured < -1  # 5 clusters: another threshold
    g = row.curves["growth"]
    assert np.all(g[row.curves["beta"] < -0.7] < 0) and np.all(g[row.curves["beta"] > -0.63] > 0)


def test_bpa_mode_three_is_dominant_and_the_runner_up_is_rejected():
    (row,), _ = quick("bpa_mode")
    assert row.extra["dominant_mode_at_T"] == row.extra["most_unstable_mode"] == 3
    assert abs(row.measured - row.alternative) > row.tolerance  # the rate is mode 3's, not the next mode's


def test_gkpr_jumps_are_closer_to_the_finite_beta_law_than_to_two_m_a_m_b():
    rows, _ = quick("gkpr_jumps")
    assert len(rows) == 2 and [r.extra["rank"] for r in rows] == [0, 0]  # the closest pair merges first
    for r in rows:
        assert abs(r.measured - r.predicted) < abs(r.measured - r.alternative)


def test_causal_attention_metastable_renyi_centres():
    (row,), _ = quick("kpr_causal")
    c, t = row.curves["centres"], list(row.curves["t"])
    # several well separated centres (delta = 4 beta^{-1/2} = 0.5) survive to t = 150: metastability
    assert np.all(c[:, t.index(75.0)] >= 3) and np.all(c[:, t.index(75.0)] <= 2 * np.pi / 0.5)
    assert np.all(c[:, 0] > c[:, -1])  # the early centres merge


# ---------------------------------------------------------------- helpers
def test_negative_beta_is_the_reflected_score_matrix(rng):
    """e^{beta <x,y>} with beta < 0 is M = -I at |beta| with W = I: the circle ODE of the paper."""
    beta, n = -0.7, 9
    theta = rng.uniform(0, 2 * np.pi, n)
    x = np.c_[np.cos(theta), np.sin(theta)]
    v = C.circle_kernel_model(beta).velocity(x)
    omega = v[:, 1] * x[:, 0] - v[:, 0] * x[:, 1]  # d theta_i / dt
    diff = theta[None, :] - theta[:, None]  # theta_j - theta_i
    expected = np.mean(np.exp(beta * np.cos(diff)) * np.sin(diff), axis=1)
    np.testing.assert_allclose(omega, expected, atol=1e-14)


def test_renyi_centres_are_separated_and_cover():
    x = np.c_[np.cos(np.linspace(0, 2 * np.pi, 50, endpoint=False)),
              np.sin(np.linspace(0, 2 * np.pi, 50, endpoint=False))]
    c = C.renyi_centres(x, 0.5)
    cos = x[c] @ x[c].T
    assert np.all(cos[np.triu_indices(len(c), 1)] < np.cos(0.5))
    assert np.all(np.max(x @ x[c].T, axis=1) >= np.cos(0.5))  # every token is within delta of a centre


# ---------------------------------------------------------------- the example
def test_example_writes_dataset_table_and_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ds, rows = ex.main(["--out", str(tmp_path), "--quick", "--rows", "pry_nonsync_threshold,clpr_gamma_c"])
    with xr.open_dataset(tmp_path / "reproductions.nc") as back:
        xr.testing.assert_identical(back.load(), ds)
    assert list(ds.row.values) == ["pry_nonsync_threshold", "pry_nonsync_threshold_control", "clpr_gamma_c",
                                   "clpr_gamma_c_control"]
    assert ds.verdict.values.tolist() == ["agrees", "disagrees", "agrees", "disagrees"]
    assert ds.kind.values.tolist() == ["published", "control", "consistency", "control"]
    # readable dims: the row and the curve's own axis
    assert set(ds.clpr_gamma_c__gamma_cross.dims) == {"clpr_gamma_c_n"}
    assert not [d for d in ds.dims if "len" in d]
    assert (tmp_path / "reproductions.png").stat().st_size > 10_000
    assert "`clpr_gamma_c`" in (tmp_path / "reproductions.md").read_text()


def test_figure_draws_only_the_panels_of_rows_run(tmp_path, monkeypatch, capsys):
    """No empty "not run" panels; math text in titles and labels; no figure when no row run has one."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from PIL import Image

    ex.main(["--out", str(tmp_path / "a"), "--quick", "--rows", "pry_nonsync_threshold"])
    with Image.open(tmp_path / "a" / "reproductions.png") as im:
        width, height = im.size
    assert width < 700 and height < 500  # one panel, not a 2 x 3 grid
    ex.main(["--out", str(tmp_path / "b"), "--quick", "--rows", "clpr_gamma_c"])
    assert not (tmp_path / "b" / "reproductions.png").exists()
    assert "no figure: none of the rows run has a panel" in capsys.readouterr().out
    for panel in ex.PANELS:  # exponents and indices as math text, not a literal caret
        assert all("$" in text for text in panel[3:6] if "^" in text or "_" in text), panel


def test_help_lists_the_row_groups(capsys):
    with pytest.raises(SystemExit):
        ex.main(["--help"])
    out = capsys.readouterr().out
    assert all(key in out for key in ex.ROWS)


@pytest.mark.parametrize("key", ["glpr_usa", "glpr_softmax"])
def test_glpr_crossing_sharpens_onto_the_equiangular_curve_as_d_grows(key):
    (row,), (control,) = quick(key)
    assert control.verdict == "disagrees" and row.params["d"] > control.params["d"]
    # d = 1024 lies closer to the curve t*(beta) = T than d = 8, beyond both uncertainties
    assert abs(control.measured - control.predicted) - abs(row.measured - row.predicted) > row.tolerance + \
        control.tolerance
