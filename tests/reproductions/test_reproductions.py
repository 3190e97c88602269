"""docs/reproductions.md: every row group at the quick sizes of examples/reproductions.py.

Each test measures with headflow (particle runs, or the library's exact sums) and checks the row's
computed verdict *and* its control, which repeats the measurement where the statement must fail and
must therefore not come out "agrees": a test that could not tell a true statement from a false one
fails here. None compares with a number copied from the page.
"""

import pathlib

import numpy as np
import pytest
import xarray as xr

from examples import _reproductions_circle as C
from examples import reproductions as ex
from examples._reproductions_sources import ROW_TEXT, SIZE_DRIFT
from examples._reproductions_verdict import mutated_prediction, shifted_predictions, verdict

DATA = pathlib.Path(__file__).resolve().parents[2] / "docs" / "data" / "reproductions.nc"


@pytest.fixture(scope="session")
def quick_rows():
    """Every row group at its quick size, run once for the session: group -> its rows and controls."""
    return {key: fn(**small) for key, (fn, _, small) in ex.ROWS.items()}


def quick(rows_of, key):
    rows = rows_of[key]
    return [r for r in rows if not r.control_of], [r for r in rows if r.control_of]


@pytest.mark.parametrize("key", list(ex.ROWS))
def test_rows_have_a_measured_uncertainty_and_controls_do_not_agree(quick_rows, key):
    rows, controls = quick(quick_rows, key)
    assert rows and all(np.isfinite(r.sigma) and r.sigma > 0 for r in rows), [(r.key, r.sigma) for r in rows]
    assert all(c.verdict != "agrees" for c in controls), [(c.key, c.measured, c.predicted) for c in controls]
    assert all(r.verdict == verdict(r.measured, r.sigma, r.predicted, r.pred_error, r.alternative) for r in rows)


def test_mutation_moves_each_prediction_in_code_and_flips_every_verdict(quick_rows):
    """Every quick row group runs again with each prediction moved where its function computes it (by 3
    tolerances, or onto the measurement for a row that disagrees): the measured values must not move (no
    measurement reads its prediction), each prediction must move by exactly the shift (every prediction passes
    through the hook), and every verdict must flip."""
    before = {r.key: r for rows in quick_rows.values() for r in rows}
    shifts = {k: float(mutated_prediction(r.measured, r.sigma, r.predicted, r.pred_error)) - r.predicted
              for k, r in before.items()}
    with shifted_predictions(shifts):
        after = {r.key: r for key, (fn, _, small) in ex.ROWS.items() for r in fn(**small)}
    assert after.keys() == before.keys()
    for k, r in after.items():
        assert r.measured == before[k].measured or (np.isnan(r.measured) and np.isnan(before[k].measured)), k
        assert r.predicted == pytest.approx(before[k].predicted + shifts[k], rel=1e-12, abs=1e-15), k
    flipped = [k for k, r in after.items() if r.verdict == before[k].verdict]
    assert not flipped, flipped


def test_full_size_verdicts_drift_from_the_quick_size_only_with_a_stated_reason(quick_rows):
    ds = xr.load_dataset(DATA)
    quick_verdicts = {r.key: r.verdict for rows in quick_rows.values() for r in rows}
    drifted = sorted(str(k) for k, v in zip(ds.row.values, ds.verdict.values)
                     if str(k) in quick_verdicts and quick_verdicts[str(k)] != str(v))
    assert set(drifted) <= set(SIZE_DRIFT), [k for k in drifted if k not in SIZE_DRIFT]


def test_split_rule_is_applied_to_every_row():
    for key, text in ROW_TEXT.items():
        assert text.table == ("consistency" if text.shares or text.reading else "published"), key


def test_long_context_d4_rejects_two_over_d(quick_rows):
    """The d = 4 run must tell 2/(d - 1) = 2/3 from 2/d = 1/2: the alternative lies outside its tolerance."""
    (row,), (control,) = quick(quick_rows, "long_context_d4")
    assert abs(row.measured - row.alternative) > row.tolerance and control.params["d"] == 5


def test_relu_decade_cost_tends_to_its_linearisation_and_the_first_decade_is_the_exact_integral(quick_rows):
    rows, controls = quick(quick_rows, "thm25_relu")
    limit, ode = rows
    cost = limit.curves["decade_cost"]
    # the bias of the linearised time is of order rho0: the decade cost rises towards n ln 10 / (2 beta)
    assert np.all(np.diff(cost) > 0) and np.all(np.abs(np.diff(cost))[1:] < np.abs(np.diff(cost))[:-1])
    assert abs(ode.measured - ode.predicted) < 1e-2 * abs(ode.alternative - ode.predicted)  # the ODE identity
    assert all(c.measured < 0.02 * limit.measured for c in controls)  # softmax and USA: O(1), not O(n log(1/rho0))


def test_pry_sync_control_starts_in_the_three_cluster_basin_and_stays_apart(quick_rows):
    rows, (control,) = quick(quick_rows, "pry_sync")
    assert control.params["betas"] == [-1.0] and control.extra["per_beta"] == [0.0]
    assert rows[0].extra["per_beta"] == [1.0]  # the same 3-cluster starts synchronise at beta = -0.16


def test_three_cluster_state_turns_stable_at_minus_two_thirds(quick_rows):
    (row,), (control,) = quick(quick_rows, "pry_nonsync_threshold")
    assert abs(row.measured + 2 / 3) < 1e-6 and row.sigma < 1e-6
    assert control.measured < -1  # 5 clusters: another threshold
    g = row.curves["growth"]
    assert np.all(g[row.curves["beta"] < -0.7] < 0) and np.all(g[row.curves["beta"] > -0.63] > 0)


def test_bpa_mode_three_is_dominant_and_the_runner_up_is_rejected(quick_rows):
    (row,), _ = quick(quick_rows, "bpa_mode")
    assert row.extra["dominant_mode_at_T"] == row.extra["most_unstable_mode"] == 3
    assert abs(row.measured - row.alternative) > row.tolerance  # the rate is mode 3's, not the next mode's


def test_gkpr_jumps_approach_two_m_a_m_b_as_beta_grows(quick_rows):
    rows, _ = quick(quick_rows, "gkpr_jumps")
    assert len(rows) == 2
    for r in rows:  # the distance to the beta -> infinity law shrinks along the sequence
        assert np.all(np.diff(np.abs(r.curves["jump"] - r.extra["two_ma_mb"])) < 0), r.curves["jump"]


def test_causal_attention_metastable_renyi_centres(quick_rows):
    (row,), (control,) = quick(quick_rows, "kpr_causal")
    assert control.extra["runs_losing"] == 0  # one Renyi ball: no centre to lose
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
    assert ds.verdict.values.tolist() == [verdict(*(float(ds[k][i]) for k in ("measured", "sigma", "predicted",
                                                                               "pred_error", "alternative")))
                                          for i in range(4)]
    assert ds.kind.values.tolist() == [ROW_TEXT["pry_nonsync_threshold"].table, "control", "consistency", "control"]
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
def test_glpr_crossing_converges_onto_the_equiangular_curve_as_d_grows(quick_rows, key):
    (row,), (control,) = quick(quick_rows, key)
    off = np.abs(row.curves["crossing"] - row.predicted)
    assert off[-1] < off[0]  # the largest d lies closer to the curve than the smallest
    # d = 8 lies further from the curve than the limit, beyond both uncertainties
    assert abs(control.measured - control.predicted) - abs(row.measured - row.predicted) > row.tolerance + \
        control.tolerance
    assert np.all(row.curves["grid_change"] <= row.curves["spacing"])  # the refined grid moved by less than its step
