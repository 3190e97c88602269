"""RK4 with reused stage buffers (fields with reads_state_only, and writes_into for the stage
velocities) equals the textbook formula; fields that cache by identity, and nested calls, get
fresh arrays."""

import numpy as np

from particles import Ensemble, SaveAt, simulate
from particles._core.sphere import GEOMETRIES
from particles._dynamics.steppers import rk4


def _stack(rng, S=5, n=7, d=3):
    x = rng.standard_normal((S, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _textbook(f, t, x, dt):
    k1 = f(t, x)
    k2 = f(t + dt / 2, x + dt / 2 * k1)
    k3 = f(t + dt / 2, x + dt / 2 * k2)
    k4 = f(t + dt, x + dt * k3)
    y = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def test_buffered_step_is_the_textbook_step(rng):
    x = _stack(rng)
    ens = Ensemble(np.eye(3), beta=np.linspace(0.5, 4.0, 5), kind="usa")
    assert ens.reads_state_only and ens.writes_into
    for dt in (0.01, 0.3):
        got, _ = rk4(ens, 0.0, x, dt, GEOMETRIES["sphere"])
        np.testing.assert_allclose(got, _textbook(ens, 0.0, x, dt), rtol=0, atol=1e-14)
        assert not np.shares_memory(got, x)
    # two successive steps return distinct arrays (the state is never a buffer)
    a, _ = rk4(ens, 0.0, x, 0.1, GEOMETRIES["sphere"])
    b, _ = rk4(ens, 0.0, a, 0.1, GEOMETRIES["sphere"])
    assert not np.shares_memory(a, b)
    np.testing.assert_allclose(a, _textbook(ens, 0.0, x, 0.1), atol=1e-14)


def test_identity_caching_field_is_not_fed_reused_buffers(rng):
    """A field that caches its last evaluation by the identity of its input (as the finite-volume
    and spectral right-hand sides do) gives the uncached field's trajectory."""
    ens = Ensemble(np.eye(3), beta=np.full(5, 2.0), kind="softmax")

    class Cached:
        geometry, geom = "sphere", GEOMETRIES["sphere"]

        def __init__(self):
            self._last = (None, None)

        def check_x(self, x, name="x"):
            return x

        def __call__(self, t, x):
            if self._last[0] is not x:
                self._last = (x, ens(t, x))
            return self._last[1]

    x0 = _stack(rng)
    ts = np.linspace(0, 2.0, 5)
    a = simulate(x0, Cached(), t1=2.0, dt=0.1, save=SaveAt(ts=ts)).x
    b = simulate(x0, ens, t1=2.0, dt=0.1, save=SaveAt(ts=ts)).x
    np.testing.assert_allclose(a, b, atol=1e-13)


def test_nested_rk4_inside_a_field(rng):
    """A field that runs its own RK4 (buffers busy) still gives the textbook outer step."""
    ens = Ensemble(np.eye(3), beta=np.full(5, 1.0), kind="usa")

    class Nested:
        geometry, geom, reads_state_only = "sphere", GEOMETRIES["sphere"], True

        def check_x(self, x, name="x"):
            return x

        def __call__(self, t, x):
            inner, _ = rk4(ens, t, x, 1e-3, GEOMETRIES["sphere"])  # nested: fresh arrays
            return ens(t, x) + 0.0 * inner

    x = _stack(rng)
    got, _ = rk4(Nested(), 0.0, x, 0.2, GEOMETRIES["sphere"])
    np.testing.assert_allclose(got, _textbook(ens, 0.0, x, 0.2), atol=1e-14)


def test_velocity_written_into_a_buffer_is_the_velocity(rng):
    """``field(t, x, out=buf)`` (the writes_into protocol) returns the velocity ``field(t, x)``
    returns, for an Ensemble and for its settling field with some systems settled (their rows 0)."""
    x = _stack(rng)
    x[1] = x[1, :1]  # system 1 collapsed: certified settled at once
    ens = Ensemble(np.eye(3), beta=np.linspace(0.5, 4.0, 5), kind="softmax")
    settling = ens.settling(1e-3)
    settling.after_step(0.0, x)
    assert settling.writes_into and np.isfinite(settling.settled_at[1]) and np.isinf(settling.settled_at[0])
    for field in (ens, settling):
        buf = np.full_like(x, np.nan)
        got = field(0.0, x, out=buf)
        np.testing.assert_array_equal(got, field(0.0, x))
    np.testing.assert_array_equal(settling(0.0, x, out=np.full_like(x, np.nan))[1], 0.0)


def test_buffered_step_of_a_settling_field_is_the_textbook_step(rng):
    """RK4 on the settling field with some systems settled (their velocities zero, the others
    through the thread's buffers) is the textbook step of the same field."""
    x = _stack(rng)
    x[2] = x[2, :1]
    settling = Ensemble(np.eye(3), beta=np.linspace(0.5, 4.0, 5), kind="usa").settling(1e-3)
    settling.after_step(0.0, x)
    got, _ = rk4(settling, 0.0, x, 0.3, GEOMETRIES["sphere"])
    np.testing.assert_allclose(got, _textbook(settling, 0.0, x, 0.3), rtol=0, atol=1e-14)
