"""Theorems 39–40: per-head rate bounds for heads rotated away from block-orthogonal."""

import numpy as np
import pytest

from particles import (
    MultiHead,
    SaveAt,
    head_rate_bounds,
    head_rate_bounds_fn,
    orthogonality_defect,
    sample_uniform,
    simulate,
)
from tests.helpers import random_symmetric

SCALE = 1.5


def rotated_heads(theta, scale=SCALE):
    """M_1 on coordinates {0, 1}, M_2 on {2, 3} rotated by θ in the (1, 2) plane:
    M_1 M_2(θ) = scale² · 0.6 sin θ · e_1 r^T, so δ(θ) = 0.6 scale² |sin θ|."""
    M1 = scale * np.diag([1.0, 0.6, 0.0, 0.0])
    M2 = scale * np.diag([0.0, 0.0, 1.0, 0.8])
    R = np.eye(4)
    R[1, 1] = R[2, 2] = np.cos(theta)
    R[1, 2], R[2, 1] = -np.sin(theta), np.sin(theta)
    return np.array([M1, R @ M2 @ R.T])


@pytest.mark.parametrize("theta", [0.0, 0.05, 0.3, 1.0])
def test_defect_closed_form(theta):
    assert orthogonality_defect(rotated_heads(theta)) == pytest.approx(0.6 * SCALE**2 * abs(np.sin(theta)), abs=1e-14)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
@pytest.mark.parametrize("theta", [0.0, 0.02, 0.2, 0.8])
def test_bounds_along_trajectory(rng, theta, geometry):
    model = MultiHead(rotated_heads(theta), beta=0.8, geometry=geometry)
    t1 = 2.0 if geometry == "sphere" else 0.1
    traj = simulate(sample_uniform(6, d=4, rng=rng), model, t1=t1, dt=t1 / 200,
                    save=SaveAt(ts=np.linspace(0, t1, 9), fn=head_rate_bounds_fn(model)))
    s = traj.saved
    tol = 1e-12 * np.abs(s["rate"]).max()
    assert np.all(s["rate"] >= s["bound"] - tol) and np.all(s["bound"] >= s["rd_bound"] - tol)
    # only the <f^h, f^k> terms are bounded: the rate sits within the slack of the orthogonal part
    slack = s["orthogonal_part"] - s["bound"]
    assert np.all(np.abs(s["rate"] - s["orthogonal_part"]) <= slack + tol)
    S = s["partition"]
    R2 = np.max(np.sum(traj.x**2, axis=-1), axis=1)[:, None] if geometry == "flat" else 1.0
    expected = s["delta"][:, None] * R2 * np.sum(S * (S.sum(axis=1, keepdims=True) - S), axis=2) / 6**3
    np.testing.assert_allclose(slack, expected, rtol=1e-9, atol=tol)
    if theta == 0.0:
        np.testing.assert_allclose(s["rate"], s["bound"], rtol=0, atol=tol)  # exact at δ = 0
    certified = s["certified"] == 1
    assert np.all(s["rate"][certified] >= -tol)


def test_bound_is_continuous_in_delta(rng):
    """bound(θ) → rate(0) as θ → 0: the gap closes linearly with δ."""
    x = sample_uniform(6, d=4, rng=rng)
    rate0 = head_rate_bounds(MultiHead(rotated_heads(0.0), beta=1.0), x)["rate"]
    gaps = []
    for theta in (1e-1, 1e-2, 1e-3):
        out = head_rate_bounds(MultiHead(rotated_heads(theta), beta=1.0), x)
        gaps.append(np.abs(out["bound"] - rate0).max() / out["delta"])
    assert max(gaps) < 2 * min(gaps)  # gap / δ stays bounded: O(δ)


def test_certification_with_nonzero_defect(rng):
    """Radial dominance with room to spare certifies monotonicity of E_h although δ > 0."""
    model = MultiHead(rotated_heads(0.05, scale=0.5), beta=0.3)
    found = 0
    for _ in range(300):
        x = sample_uniform(5, d=4, rng=rng)
        out = head_rate_bounds(model, x)
        assert np.all(out["rate"] >= out["bound"] - 1e-14)
        found += int(out["certified"].sum())
        assert np.all(out["rate"][out["certified"] == 1] >= 0)
    assert out["delta"] > 0 and found > 0


def test_rate_matches_dense_theorem16(rng):
    M = random_symmetric(rng, 3, 4, 0.5)
    model = MultiHead(M, beta=1.2)
    x = sample_uniform(7, d=4, rng=rng)
    out = head_rate_bounds(model, x)
    w = np.exp(model.beta * model.scores(x))
    f = np.einsum("hij,jd,hed->hie", w, x, M)
    v = f.sum(0) / 7
    pv = v - np.sum(v * x, 1)[:, None] * x
    np.testing.assert_allclose(out["rate"], np.einsum("hid,id->h", f, pv) / 49, rtol=1e-11)
    np.testing.assert_allclose(out["partition"], w.sum(-1), rtol=1e-12)


def test_bad_input(rng):
    M = rotated_heads(0.1)
    with pytest.raises(ValueError, match="must be value-aligned"):
        head_rate_bounds(MultiHead(M, M + 0.1, beta=1.0), np.eye(4))
    with pytest.raises(ValueError, match="'model' parameter of head_rate_bounds: M must be symmetric"):
        head_rate_bounds(MultiHead(M + np.triu(np.ones((4, 4)), 1), beta=1.0), np.eye(4))
    with pytest.raises(ValueError, match="must have kind in"):
        head_rate_bounds_fn(MultiHead(M, beta=1.0, kind="softmax"))
    with pytest.raises(ValueError, match="'M' parameter of orthogonality_defect must be a particles.MultiHead or an "
                                         "array of shape"):
        orthogonality_defect(np.zeros((2, 3, 4)))
