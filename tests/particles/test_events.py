"""Events of the solve loop (``simulate(events=...)``): hitting times against a closed form, the order of
their error, terminal and direction semantics as solve_ivp's, an event at t0, ensembles per system, the
dataset, and the refusals."""

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

import particles
from particles import Ensemble, MultiHead, SaveAt, simulate
from particles.events import Event, energy_reaches, min_distance, smallest_distance
from particles.validation import InvalidParameterError

BETA, THETA0, EPS = 2.0, 2.0, 0.3
MODEL = MultiHead(np.eye(2), beta=BETA, kind="softmax")
X0 = np.array([[1.0, 0.0], [np.cos(THETA0), np.sin(THETA0)]])


def _closing_rate(theta):
    # two tokens on S^1 under one softmax head: each moves towards the other at
    # sin(theta) e^{beta cos theta} / (e^beta + e^{beta cos theta}), so the angle closes at twice that
    w = np.exp(BETA * np.cos(theta))
    return 2 * np.sin(theta) * w / (np.exp(BETA) + w)


def _hitting_time(eps):
    """The time the angle between the two tokens takes from THETA0 to eps (the integral of 1/rate)."""
    return quad(lambda th: 1 / _closing_rate(th), eps, THETA0, epsabs=1e-13, epsrel=1e-13, limit=200)[0]


T_EXACT = _hitting_time(EPS)


def test_the_closed_form_agrees_with_solve_ivp():
    ev = lambda t, y: y[0] - EPS  # noqa: E731
    ev.terminal = True
    sol = solve_ivp(lambda t, y: [-_closing_rate(y[0])], (0, 20), [THETA0], method="DOP853", rtol=1e-13,
                    atol=1e-14, events=ev)
    assert abs(sol.t_events[0][0] - T_EXACT) < 1e-11


def test_dopri5_locates_the_hitting_time_to_its_tolerance():
    for rtol in (1e-6, 1e-9, 1e-12):
        traj = simulate(X0, MODEL, t1=20.0, method="dopri5", rtol=rtol, atol=rtol / 100,
                        events=min_distance(EPS, terminal=True))
        assert traj.status == "terminated" and traj.success
        assert abs(traj.t_events[0][0] - T_EXACT) < 10 * rtol
        # the run ends at the event, on the sphere, with the tokens EPS apart
        assert traj.t[-1] == traj.t_events[0][0]
        np.testing.assert_allclose(np.linalg.norm(traj.x_final, axis=1), 1.0, atol=1e-14)
        assert abs(smallest_distance(traj.x_events[0][0]) - EPS) < 1e-12


def test_rk4_hitting_time_error_falls_with_the_fourth_power_of_dt():
    errors = [abs(simulate(X0, MODEL, t1=20.0, dt=dt, events=min_distance(EPS, terminal=True)).t_events[0][0]
                  - T_EXACT) for dt in (0.1, 0.05, 0.025)]
    assert errors[-1] < 1e-8
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all(ratios > 12) and np.all(ratios < 20), ratios  # 2^4 = 16


def test_heun_and_euler_maruyama_locate_events_too():
    err = [abs(simulate(X0, MODEL, t1=20.0, dt=dt, method="heun", events=min_distance(EPS)).t_events[0][0]
               - T_EXACT) for dt in (0.05, 0.025)]
    assert 3.5 < err[0] / err[1] < 4.5  # second order
    # a noisy step's path is not resolved between its ends: the chord is searched (weak noise: as euler)
    noisy, euler = (simulate(X0, MODEL, t1=20.0, dt=0.01, events=min_distance(EPS, terminal=True), **kw).t_events[0][0]
                    for kw in (dict(method="euler_maruyama", kappa=1e8, rng=0), dict(method="euler")))
    assert abs(noisy - euler) < 2e-2 and abs(euler - T_EXACT) < 0.1


def test_non_terminal_events_are_recorded_and_the_run_goes_on():
    levels = (1.5, 1.0, 0.5)
    events = [min_distance(eps) for eps in levels]
    traj = simulate(X0, MODEL, t1=20.0, method="dopri5", rtol=1e-10, atol=1e-12, events=events,
                    save=SaveAt(ts=[0.0, 20.0]))
    assert traj.status == "finished" and traj.t[-1] == 20.0
    assert [r.name for r in traj.events] == ["min_distance", "min_distance_1", "min_distance_2"]
    got = [t[0] for t in traj.t_events]
    np.testing.assert_allclose(got, [_hitting_time(e) for e in levels], atol=1e-8)
    assert all(t.shape == (1,) and x.shape == (1, 2, 2) for t, x in zip(traj.t_events, traj.x_events))


def test_direction_filters_crossings():
    up = min_distance(EPS, direction=1)  # the distance only falls: never crosses upwards
    both = min_distance(EPS, direction=0)
    traj = simulate(X0, MODEL, t1=20.0, dt=0.05, events=[up, both])
    assert traj.t_events[0].size == 0 and traj.t_events[1].size == 1
    # a level crossed both ways: cos(angle of token 0) goes from 1 down to cos(th) and back up as it turns
    g = Event(lambda t, x: np.sin(t) - 0.5, direction=-1)
    traj = simulate(X0, lambda t, x: np.zeros_like(x), t1=10.0, dt=0.1, events=g)
    np.testing.assert_allclose(traj.t_events[0], [5 * np.pi / 6, 5 * np.pi / 6 + 2 * np.pi], atol=1e-6)


def test_terminal_count_stops_at_that_occurrence():
    g = Event(lambda t, x: np.cos(3 * t), terminal=3)
    traj = simulate(X0, lambda t, x: np.zeros_like(x), t1=10.0, dt=0.1, events=g)
    assert traj.status == "terminated"
    np.testing.assert_allclose(traj.t_events[0], [np.pi / 6, np.pi / 2, 5 * np.pi / 6], atol=1e-12)
    assert traj.t[-1] == traj.t_events[0][-1]


def test_an_event_zero_at_t0_is_handled_as_solve_ivp():
    def g(t, x):
        return t

    for terminal, direction in ((True, 0), (True, 1), (True, -1), (False, 0)):
        g.terminal, g.direction = terminal, direction
        ref = solve_ivp(lambda t, y: [0.0], (0.0, 1.0), [1.0], events=g)
        traj = simulate(X0, MODEL, t1=1.0, dt=0.1, events=g)
        np.testing.assert_array_equal(traj.t_events[0], ref.t_events[0])
        assert traj.status == ("terminated" if ref.status == 1 else "finished")
        if ref.status == 1:  # the run stops at t0 with the initial state
            assert traj.t[-1] == 0.0 and np.array_equal(traj.x_final, X0)
    # a zero at a step's end is one occurrence (not one per step that touches it)
    traj = simulate(X0, MODEL, t1=1.0, dt=0.25, events=Event(lambda t, x: t - 0.5))
    np.testing.assert_array_equal(traj.t_events[0], [0.5])


def test_ensemble_event_times_are_the_single_system_ones():
    betas = np.array([0.5, 1.0, 2.0, 4.0])
    x0 = particles.sample_uniform(5, d=3, rng=2)
    ens = Ensemble(np.eye(3), beta=betas)
    stack = np.stack([x0] * betas.size)
    for method, kw, tol in (("rk4", dict(dt=0.05), 1e-13), ("dopri5", dict(rtol=1e-10, atol=1e-12), 1e-9)):
        traj = simulate(stack, ens, t1=30.0, method=method, events=min_distance(0.2, terminal=True), **kw)
        times = traj.t_events[0]
        assert times.shape == (betas.size, 1) and traj.x_events[0].shape == (betas.size, 1, 5, 3)
        # the stack stops when every system has met its terminal event: at the latest of them
        assert traj.status == "terminated" and traj.t[-1] == times.max()
        # an event that does not say it maps sub-stacks is searched on the whole stack: same roots
        whole = Event(lambda t, x: smallest_distance(x) - 0.2, terminal=True, direction=-1)
        assert not whole.per_system and min_distance(0.2).per_system
        again = simulate(stack, ens, t1=30.0, method=method, events=whole, **kw)
        np.testing.assert_allclose(again.t_events[0], times, rtol=0, atol=1e-14)
        for s, beta in enumerate(betas):
            alone = simulate(x0, MultiHead(np.eye(3), beta=beta, kind="softmax"), t1=30.0, method=method,
                             events=min_distance(0.2, terminal=True), **kw)
            assert abs(alone.t_events[0][0] - times[s, 0]) < tol
            np.testing.assert_allclose(traj.x_events[0][s, 0], alone.x_events[0][0], atol=1e-6)


def test_ensemble_records_each_systems_crossings_nan_padded():
    ens = Ensemble(np.eye(2), beta=[1.0, 1.0])
    stack = np.stack([X0, X0])
    g = Event(lambda t, x: np.cos(np.array([1.0, 2.0]) * t))  # by t = 4, system 0 crosses once, system 1 thrice
    traj = simulate(stack, ens, t1=4.0, dt=0.05, events=g)
    t = traj.t_events[0]
    np.testing.assert_allclose(t[0], [np.pi / 2, np.nan, np.nan], atol=1e-12)
    np.testing.assert_allclose(t[1], [np.pi / 4, 3 * np.pi / 4, 5 * np.pi / 4], atol=1e-12)
    assert np.isnan(traj.x_events[0][0, 1:]).all() and np.isfinite(traj.x_events[0][1]).all()


def test_energy_reaches_locates_the_level():
    model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    x0 = particles.sample_uniform(6, d=3, rng=0)
    level = model.energy(x0) + 0.01
    traj = simulate(x0, model, t1=5.0, method="dopri5", rtol=1e-11, atol=1e-13,
                    events=energy_reaches(model, level, terminal=True, direction=1))
    assert traj.status == "terminated"
    assert abs(model.energy(traj.x_final) - level) < 1e-12


def test_smallest_distance_blocks_and_agrees_with_the_dense_matrix():
    x = particles.sample_uniform(300, d=4, rng=3)
    gram = np.clip(x @ x.T, -1, 1)
    dense = np.arccos(gram[np.triu_indices(300, 1)]).min()
    assert abs(smallest_distance(x) - dense) < 1e-7
    stack = np.stack([x, x[::-1], particles.sample_uniform(300, d=4, rng=4)])
    got = smallest_distance(stack, metric="chordal")
    assert got.shape == (3,) and got[0] == got[1]
    # close pairs are measured from the difference of the rows (arccos of the Gram entry loses them)
    y = np.array([[1.0, 0.0], [np.cos(1e-9), np.sin(1e-9)]])
    assert abs(smallest_distance(y) - 1e-9) < 1e-20


def test_events_in_the_dataset(tmp_path):
    metrics, xr = pytest.importorskip("metrics"), pytest.importorskip("xarray")
    traj = simulate(X0, MODEL, t1=20.0, dt=0.05, events=[min_distance(1.0), min_distance(EPS, terminal=True)])
    ds = metrics.trajectory_to_dataset(traj, MODEL)
    assert ds.event_time.dims == ("event", "occurrence")
    assert list(ds.event.values) == ["min_distance", "min_distance_1"]
    assert ds.event_positions.dims == ("event", "occurrence", "particle", "component")
    assert float(ds.event_time.sel(event="min_distance_1")[0]) == traj.t_events[1][0]
    assert list(ds.event_terminal.values) == [0, 1] and ds.attrs["status"] == "terminated"
    path = tmp_path / "events.nc"
    ds.to_netcdf(path)
    xr.testing.assert_identical(xr.load_dataset(path).drop_attrs(), ds.drop_attrs())  # netCDF round trip


def test_bad_events_are_refused_by_name():
    def g(t, x):
        return 1.0

    for bad in (3, "abc", [3], [np.sin, "x"]):
        with pytest.raises(InvalidParameterError, match="'events'"):
            simulate(X0, MODEL, t1=1.0, dt=0.1, events=bad)
    for attr, value in (("terminal", -1), ("terminal", 1.5), ("direction", "up"), ("direction", np.nan)):
        setattr(g, attr, value)
        with pytest.raises(InvalidParameterError, match=rf"events\[0\]\.{attr}"):
            simulate(X0, MODEL, t1=1.0, dt=0.1, events=g)
        delattr(g, attr)
    with pytest.raises(InvalidParameterError, match="must return a float"):
        simulate(X0, MODEL, t1=1.0, dt=0.1, events=lambda t, x: np.ones(3))
    with pytest.raises(InvalidParameterError, match=r"shape \(2,\), one value per system"):
        simulate(np.stack([X0, X0]), Ensemble(np.eye(2), beta=[1.0, 2.0]), t1=1.0, dt=0.1, events=g)
    with pytest.raises(InvalidParameterError, match="dopri5_systems"):
        simulate(np.stack([X0]), Ensemble(np.eye(2), beta=[1.0]), t1=1.0, dt=0.1, method="dopri5_systems",
                 save=SaveAt(ts=[1.0]), events=g)
    for kwargs in (dict(eps=0.0), dict(eps=np.inf), dict(eps=0.1, metric="angle"), dict(eps=0.1, terminal=-2)):
        with pytest.raises(InvalidParameterError):
            min_distance(**kwargs)
    with pytest.raises(InvalidParameterError, match="'model'"):
        energy_reaches("softmax", 1.0)
    with pytest.raises(InvalidParameterError, match="'fn'"):
        Event(3)
