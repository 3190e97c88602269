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


@pytest.mark.parametrize("scheme, kind, options", [
    ("fv_circle", "softmax", {}),
    ("jko", "usa", {"dt": 0.01}),
    ("spectral", "softmax", {"L": 32}),
])
def test_every_grid_scheme_has_the_failure_policy_and_progress(capsys, scheme, kind, options):
    # every mean-field scheme is a stepper of the particle solve loop: max_steps, on_failure, progress
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind=kind)
    with pytest.raises(SolverError, match="max_steps=3 reached"):
        mf.wasserstein_ascent(_mu0(), model, t1=1.0, n_saves=5, scheme=scheme, max_steps=3, **options)
    res = mf.wasserstein_ascent(_mu0(), model, t1=1.0, n_saves=5, scheme=scheme, max_steps=3, on_failure="return",
                                progress=True, **options)
    assert res.status == "failed" and "max_steps=3" in res.message
    assert 1 <= len(res.t) == len(res.mass) == len(res.energy) < 5
    # the spectral scheme's bar also shows its band limit (t and L)
    assert ("spectral: " if scheme == "spectral" else "simulate[") in capsys.readouterr().err
    full = mf.wasserstein_ascent(_mu0(), model, t1=1.0, n_saves=5, scheme=scheme, **options)
    assert full.status == "finished" and full.t[-1] == 1.0
    np.testing.assert_array_equal(full.mass[: len(res.t)], res.mass)  # the same steps up to the failure


def test_jko_lands_on_the_save_times():
    # dt does not divide the save spacing: the last step before a save is shorter, not past it
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa")
    res = mf.wasserstein_ascent(_mu0(), model, t1=0.25, n_saves=3, scheme="jko", dt=0.1)
    np.testing.assert_array_equal(res.t, [0.0, 0.125, 0.25])
    assert res.n_steps == 4  # 0.1 + 0.025 to each save
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-13)


def test_spectral_steps_reuse_the_last_stage():
    # first same as last: 6 right-hand sides per step, plus 1 at the start and 1 for the first step size
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    from meanfield._spectral import circle

    calls = []
    rhs = circle.Circle.rhs
    try:
        circle.Circle.rhs = lambda self, c: calls.append(1) or rhs(self, c)
        res = mf.wasserstein_ascent(_mu0(), model, t1=0.5, n_saves=2, scheme="spectral", L=32)
    finally:
        circle.Circle.rhs = rhs
    assert len(calls) == 6 * (res.n_steps + res.info["n_rejected"]) + 1
