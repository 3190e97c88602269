"""The solve loop steps only the running systems of a settling ensemble (particles/_dynamics/loop.py): the
same trajectories as stepping the whole stack, settled systems kept exactly, saves of the whole stack."""

import numpy as np
import pytest

from particles import Ensemble, SaveAt, simulate
from particles._dynamics.controllers import ConstantStep, PIDController
from particles._dynamics.loop import Compaction
from particles._dynamics.steppers import STEPPERS
from particles._model.settling import SettlingEnsemble


def _sphere(rng, S, n, d):
    x = rng.standard_normal((S, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture
def whole_stack(monkeypatch):
    """simulate stepping the whole stack (the route before compaction), for comparison."""
    def without():
        monkeypatch.setattr(Compaction, "of", classmethod(lambda cls, *args: None))
    return without


def _run(x0, merge, method, save):
    heads = np.array([0.5, 1.0, 2.0])[:, None, None] * np.eye(x0.shape[2])
    field = Ensemble(heads, beta=np.linspace(0.2, 6.0, x0.shape[0])).settling(1e-3, merge=merge)
    stats = SaveAt(ts=save.ts, every=save.every, t0=save.t0, fn=lambda t, x: {"mean": x.mean(axis=(1, 2))})
    return simulate(x0, field, t1=12.0, dt=0.3, method=method, save=stats, progress=False), field


@pytest.mark.parametrize("method", ["rk4", "heun", "euler"])
@pytest.mark.parametrize("merge", [0.0, 1e-6])
@pytest.mark.parametrize("save", [SaveAt(every=1), SaveAt(ts=[0.0, 2.5, 7.0, 12.0]), SaveAt(t0=False)])
def test_compacted_steps_are_the_whole_stack_steps(rng, whole_stack, method, merge, save):
    x0 = _sphere(rng, 12, 10, 4)
    fast, field = _run(x0, merge, method, save)
    whole_stack()
    ref, ref_field = _run(x0, merge, method, save)
    settled = np.isfinite(field.settled_at)
    assert 0 < settled.sum() < x0.shape[0]  # both kinds of system are there
    np.testing.assert_array_equal(field.settled_at, ref_field.settled_at)
    assert field.system_evaluations == ref_field.system_evaluations
    np.testing.assert_array_equal(fast.t, ref.t)
    assert fast.x.shape == ref.x.shape and fast.n_steps == ref.n_steps
    # the running rows take the very same steps; a whole-stack step retracts a settled row onto itself
    np.testing.assert_allclose(fast.x, ref.x, rtol=0, atol=1e-15)
    np.testing.assert_allclose(fast.saved["mean"], ref.saved["mean"], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(fast.x_final, fast.x[-1])


def test_settled_systems_stay_exactly_where_they_were_certified(rng):
    x0 = _sphere(rng, 12, 10, 4)
    traj, field = _run(x0, 1e-6, "rk4", SaveAt(every=1))
    for s in np.nonzero(np.isfinite(field.settled_at))[0]:
        k = int(np.searchsorted(traj.t, field.settled_at[s]))
        assert traj.t[k] == field.settled_at[s]
        np.testing.assert_array_equal(traj.x[k:, s], np.broadcast_to(traj.x[k, s], traj.x[k:, s].shape))


def test_a_settled_stack_takes_no_more_steps_of_work(rng, whole_stack):
    x0 = np.array([0, 0, 1.0]) + rng.uniform(-0.01, 0.01, (3, 5, 3)) * np.array([1.0, 1.0, 0.0])
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    field = Ensemble(np.eye(3), beta=[1.0, 2.0, 4.0]).settling(0.05)
    traj = simulate(x0, field, t1=3.0, dt=0.1, save=SaveAt(ts=[0.0, 1.5, 3.0]), progress=False)
    assert np.all(field.settled_at == 0.0) and field.system_evaluations == 0
    assert traj.n_steps == 30  # the steps of the run are still counted, as the whole stack's run counts them
    np.testing.assert_array_equal(traj.x, np.broadcast_to(x0, (3,) + x0.shape))


def test_adaptive_steps_noise_events_and_other_controllers_step_the_whole_stack():
    # an adaptive step's error norm, the noise draws and the event functions span the whole stack
    field, x0 = Ensemble(np.eye(3), beta=[1.0]).settling(0.05), np.eye(3)[None]
    step = ConstantStep(0.1)
    assert Compaction.of(field, STEPPERS["rk4"], step, None, x0) is not None
    assert Compaction.of(Ensemble(np.eye(3), beta=[1.0]), STEPPERS["rk4"], step, None, x0) is None  # no running
    assert Compaction.of(field, STEPPERS["dopri5"], PIDController(4), None, x0) is None
    assert Compaction.of(field, STEPPERS["euler_maruyama"], step, None, x0) is None
    assert Compaction.of(field, STEPPERS["rk4"], PIDController(4), None, x0) is None
    assert Compaction.of(field, STEPPERS["rk4"], step, (lambda t, x: x[:, 0, 0],), x0) is None


@pytest.mark.parametrize("method", ["rk4", "heun", "euler"])
def test_steps_over_the_group_representatives_are_the_token_steps(rng, monkeypatch, method):
    """Once every running system has a group of merged tokens, the fixed steps run their stages over the
    representatives alone (SettlingEnsemble.quotient): the same trajectories, to the last bit, and the same
    evaluation count as the stages over every token."""
    x0 = _sphere(rng, 12, 10, 4)
    taken = []
    quotient = SettlingEnsemble.quotient

    def counted(self, x):
        q = quotient(self, x)
        taken.append(q is not None and q.x.shape[1] < x.shape[1])
        return q

    monkeypatch.setattr(SettlingEnsemble, "quotient", counted)
    fast, field = _run(x0, 1e-6, method, SaveAt(every=1))
    assert sum(taken) >= 5  # steps over the representatives were taken
    monkeypatch.setattr(SettlingEnsemble, "quotient", lambda self, x: None)
    ref, ref_field = _run(x0, 1e-6, method, SaveAt(every=1))
    np.testing.assert_array_equal(fast.x, ref.x)
    np.testing.assert_array_equal(fast.saved["mean"], ref.saved["mean"])
    np.testing.assert_array_equal(field.settled_at, ref_field.settled_at)
    assert field.system_evaluations == ref_field.system_evaluations
