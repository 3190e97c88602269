"""Metastability: plateau detection, the staircase identity, and a staircase on the circle at large beta."""

import numpy as np
import pytest

from metrics import cluster_energy, plateaus, staircase
from particles import MultiHead, SaveAt, sample_uniform, simulate


def clustered_state(angles, counts, jitter, rng):
    theta = np.concatenate([a + jitter * rng.standard_normal(c) for a, c in zip(angles, counts)])
    return np.stack([np.cos(theta), np.sin(theta)], 1)


def test_plateaus_of_synthetic_staircase():
    t = np.logspace(-1, 4, 101)
    s = np.log10(t)
    v = 1.0 + (s > 1) + 2.0 * (s > 2.5) + 1e-4 * s  # steps at 10 and 10^2.5, slight slope
    found = plateaus(t, v, rtol=0.02)
    assert [round(p.value) for p in found] == [1, 2, 4]
    assert found[0].start == t[0] and found[-1].end == t[-1]
    assert np.log10(found[0].end) == pytest.approx(1.0, abs=0.06)
    assert np.log10(found[1].start) == pytest.approx(1.0, abs=0.06)
    counts = np.where(s < 2, 8, np.where(s < 3, 3, 2))
    runs = plateaus(t, counts)
    assert [p.value for p in runs] == [8, 3, 2] and all(counts[p.i0] == counts[p.i1] == p.value for p in runs)
    # linear time and a minimum duration that drops the short middle step
    assert len(plateaus(t, counts, log_time=False, min_duration=0.5 * t[-1])) == 1


def test_cluster_energy_is_exact_for_collapsed_clusters(rng):
    model = MultiHead(np.array([np.eye(3), np.diag([0.5, 1.0, -0.3])]), beta=3.0)
    p = sample_uniform(3, d=3, rng=rng)
    counts = np.array([5, 2, 1])
    x = np.repeat(p, counts, axis=0)
    assert cluster_energy(model, p, counts / counts.sum()) == pytest.approx(model.energy(x), rel=1e-13)


def test_staircase_identity_on_synthetic_run(rng):
    """Three stages of tight, well-separated clusters: plateaus, masses and 2βE/e^β ≈ Σ m_c²."""
    beta = 20.0
    model = MultiHead.scalar([1.0], d=2, beta=beta)
    stages = [([0.0, 1.5, 3.0, 4.5], [3, 3, 2, 4]), ([0.7, 3.0, 4.5], [6, 2, 4]), ([1.0, 4.0], [8, 4])]
    t = np.logspace(0, 3, 31)
    xs = [clustered_state(*stages[min(2, int(np.log10(tk) + 1e-9))], 1e-6, rng) for tk in t]
    steps = staircase(model, np.array(xs), t)
    assert [s.n_clusters for s in steps] == [4, 3, 2]
    for st, (_, counts) in zip(steps, stages):
        assert st.masses == tuple(sorted(np.array(counts) / 12, reverse=True))
        assert st.cluster_energy == pytest.approx(st.energy, rel=1e-6)
        # cross terms are O(e^{-β(1 − cos 1.5)}) = O(1e-13) here
        assert st.normalised_energy == pytest.approx(st.sum_sq_masses, abs=1e-6)


def test_staircase_on_the_circle_at_large_beta():
    model = MultiHead.scalar([1.0], d=2, beta=6.0, log_time_scale="auto")
    ts = np.concatenate([[0.0], np.logspace(-1, np.log10(3e3), 41)])
    traj = simulate(sample_uniform(16, d=2, rng=1), model, t1=ts[-1], method="dopri5", rtol=1e-6, atol=1e-8,
                    save=SaveAt(ts=ts))
    steps = staircase(model, traj)
    assert len(steps) >= 2
    assert np.all(np.diff([s.energy for s in steps]) > 0)  # a staircase: E rises from plateau to plateau
    assert np.all(np.diff([s.n_clusters for s in steps]) < 0)
    last = steps[-1]
    assert last.n_clusters < 16 and last.normalised_energy == pytest.approx(last.sum_sq_masses, rel=1e-3)


def test_bad_input(rng):
    model = MultiHead.scalar([1.0], d=2, beta=2.0)
    with pytest.raises(ValueError, match="plateaus needs at least 3 saved times with t > 0"):
        plateaus([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="t of plateaus must have shape \\(3,\\)"):
        plateaus([1.0, 2.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="traj of staircase needs at least 3 saved times"):
        staircase(model, np.stack([np.eye(2)] * 2), [1.0, 2.0])
    with pytest.raises(ValueError, match="staircase needs the save times ts"):
        staircase(model, np.stack([np.eye(2)] * 3))
    with pytest.raises(ValueError,
                       match="'masses' parameter of cluster_energy: must have one entry per row of centres"):
        cluster_energy(model, np.eye(2), [1.0])
