"""The field protocol: every field states its geometry, and the solver integrates there."""

import numpy as np
import pytest

from particles import InvalidParameterError, MultiHead, SaveAt, TimeDependent, simulate
from particles._dynamics.field import CallableField


def _x0(rng, n=6, d=3):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("geometry", ["flat", "sphere"])
def test_time_dependent_integrates_on_its_template_geometry(rng, geometry):
    # regression: a flat template used to be integrated on the sphere (norms stayed 1)
    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax", geometry=geometry)
    field = TimeDependent(lambda t: (model.M, model.W), model)
    x0 = _x0(rng)
    direct = simulate(x0, model, t1=1.0, dt=0.01)
    through = simulate(x0, field, t1=1.0, dt=0.01)
    np.testing.assert_allclose(through.x[-1], direct.x[-1], rtol=0, atol=1e-12)
    norms = np.linalg.norm(through.x[-1], axis=1)
    if geometry == "flat":
        assert norms.min() > 1.5  # free softmax heads W = I push tokens outward: |x| grows
    else:
        np.testing.assert_allclose(norms, 1.0, atol=1e-12)


def test_time_dependent_weights_scale_time(rng):
    # softmax heads with W(t) = a(t) W: the run is the constant run at tau(t) = ∫ a = t + t²/2
    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="softmax")
    field = TimeDependent(lambda t: (model.M, (1 + t) * model.W), model)
    x0 = _x0(rng)
    run = simulate(x0, field, t1=1.0, dt=1e-3, save=SaveAt(ts=[1.0]))
    ref = simulate(x0, model, t1=1.5, dt=1e-3, save=SaveAt(ts=[1.5]))
    np.testing.assert_allclose(run.x[-1], ref.x[-1], atol=1e-9)


def test_plain_callable_runs_on_the_stated_geometry(rng):
    x0 = _x0(rng, 4, 2)
    # dx/dt = x in flat space: x(t) = e^t x0 (on the sphere the projection would make it 0)
    traj = simulate(x0, lambda t, x: x, t1=1.0, dt=1e-3, geometry="flat")
    np.testing.assert_allclose(traj.x[-1], np.e * x0, rtol=1e-10)
    still = simulate(x0, lambda t, x: x - np.sum(x * x, axis=1, keepdims=True) * x, t1=1.0, dt=1e-2)
    np.testing.assert_allclose(still.x[-1], x0, atol=1e-14)


def test_field_geometry_conflict_and_bad_returns(rng):
    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax", geometry="flat")
    field = TimeDependent(lambda t: (model.M, model.W), model)
    with pytest.raises(InvalidParameterError, match="conflicts with the field's geometry 'flat'"):
        simulate(_x0(rng), field, t1=1.0, dt=0.1, geometry="sphere")
    with pytest.raises(InvalidParameterError, match=r"field\(t0, x0\) of simulate must return an array of shape"):
        simulate(_x0(rng), lambda t, x: x[:1], t1=1.0, dt=0.1)
    with pytest.raises(InvalidParameterError, match="'geometry' parameter of simulate must be one of"):
        CallableField(lambda t, x: x, "torus")
