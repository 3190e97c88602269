"""The verdict rule of docs/reproductions.md, and the mutation test over every row of the recorded run."""

import pathlib

import numpy as np
import pytest
import xarray as xr

from examples._reproductions_verdict import Row, jeffreys, mutated_prediction, tolerance, verdict

DATA = pathlib.Path(__file__).resolve().parents[2] / "docs" / "data" / "reproductions.nc"


def test_rule_on_its_three_outcomes():
    assert verdict(1.0, 0.1, 1.15) == "agrees"  # 0.15 <= 2 * 0.1
    assert verdict(1.0, 0.1, 1.25) == "disagrees"
    assert verdict(1.0, 0.1, 1.25, pred_error=0.05) == "agrees"  # the prediction's own error widens the band
    assert verdict(1.0, 0.1, 1.0, alternative=1.1) == "inconclusive"  # cannot tell the two apart
    assert verdict(1.0, 0.1, 1.0, alternative=1.3) == "agrees"
    assert verdict(1.0, np.nan, 1.0) == "inconclusive"  # one run: no measured uncertainty
    assert verdict(0.19, 0.14, 1.0, alternative=0.0) == "disagrees"  # a loss rate of 0.19 +- 0.14 is not 1


def test_rule_is_elementwise():
    out = verdict([1.0, 1.0, 1.0], [0.1, 0.1, np.inf], [1.0, 2.0, 1.0])
    assert out.tolist() == ["agrees", "disagrees", "inconclusive"]


def test_jeffreys_keeps_an_uncertainty_when_every_run_succeeds():
    mean, sd = jeffreys(8, 8)
    assert 0.9 < mean < 1 and 0.02 < sd < 0.1
    assert jeffreys(0, 8)[0] == pytest.approx(1 - mean) and jeffreys(0, 8)[1] == pytest.approx(sd)


def test_row_verdict_is_the_rule():
    r = Row("x", 0.68, 0.03, "bootstrap", 2 / 3, alternative=0.5)
    assert r.tolerance == pytest.approx(0.06) and r.verdict == "agrees"
    assert Row("x", 0.6, 0.1, "bootstrap", 2 / 3, alternative=0.5).verdict == "inconclusive"


@pytest.mark.parametrize("measured,sigma,predicted,err,alt", [
    (1.0, 0.1, 1.05, 0.0, np.nan), (1.0, 0.1, 1.0, 0.02, 1.1), (1.0, 0.1, 2.0, 0.0, np.nan),
    (0.19, 0.14, 1.0, 0.0, 0.0), (3.0, 1e-15, 3.0, 0.0, np.nan)])
def test_mutation_flips_the_verdict(measured, sigma, predicted, err, alt):
    before = verdict(measured, sigma, predicted, err, alt)
    after = verdict(measured, sigma, float(mutated_prediction(measured, sigma, predicted, err)), err, alt)
    assert after != before
    assert after == "disagrees" or before == "disagrees"


def _recorded():
    if not DATA.is_file():
        pytest.fail(f"{DATA} is missing: run python examples/reproductions.py --out docs/data")
    return xr.load_dataset(DATA)


def test_mutation_flips_every_recorded_row():
    """Each row's prediction moved by 3 tolerances (or set to the measurement when it disagrees) flips its
    verdict: no row agrees whatever its prediction."""
    ds = _recorded()
    args = [ds[k].values for k in ("measured", "sigma", "predicted", "pred_error")]
    mutated = mutated_prediction(*args)
    after = verdict(args[0], args[1], mutated, args[3], ds.alternative.values)
    flipped = after != ds.verdict.values
    assert flipped.all(), list(ds.row.values[~flipped])
    np.testing.assert_allclose(ds.tolerance.values, tolerance(ds.sigma.values, ds.pred_error.values))
