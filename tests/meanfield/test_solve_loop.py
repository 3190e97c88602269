"""The mean-field schemes run in the particle solve loop: CFL steps, failure policy, progress."""

import numpy as np
import pytest

import meanfield as mf
from particles import MultiHead, SolverError


def _mu0(m=64):
    return mf.GridMeasure.from_density(*mf.circle_grid(m), lambda y: 1 + 0.5 * y[:, 0])


def test_fv_circle_step_is_the_cfl_step():
    # a constant scalar-head velocity field has rate max|v|/Δ; n_steps >= t1 · rate / cfl
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    mu0 = _mu0()
    v = mf.circle_velocity(model, mu0.mass)
    rate0 = np.abs(v).max() / (2 * np.pi / 64)
    res = mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=3, scheme="fv_circle", cfl=0.3)
    assert res.status == "finished" and res.n_steps >= int(0.5 * rate0 / 0.3)
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-13)


def test_fv_failure_policy_and_progress(capsys):
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    with pytest.raises(SolverError, match="max_steps=5 reached"):
        mf.wasserstein_ascent(_mu0(), model, t1=1.0, n_saves=5, scheme="fv_circle", max_steps=5)
    res = mf.wasserstein_ascent(_mu0(), model, t1=1.0, n_saves=5, scheme="fv_circle", max_steps=5,
                                on_failure="return", progress=True)
    assert res.status == "failed" and "max_steps=5" in res.message
    assert len(res.t) == len(res.mass) == len(res.energy) < 5  # cut at the last save reached
    assert "simulate[heun]" in capsys.readouterr().err


def test_jko_refuses_the_loop_options():
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa")
    with pytest.raises(ValueError, match="scheme 'jko' of wasserstein_ascent takes the options"):
        mf.wasserstein_ascent(_mu0(), model, t1=1.0, scheme="jko", dt=0.1, progress=True)
