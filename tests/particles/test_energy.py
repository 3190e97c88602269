"""docs/theory.md §2–§3: Theorem 11, its failure modes, Theorem 12, Theorems 16–17, cautions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from particles import MultiHead, SaveAt, diagnose, sample_uniform, simulate
from tests.helpers import random_symmetric


def flow_derivative(model, x, fn, h=1e-4):
    """d/dt fn(x(t)) along the exact flow through x: central differences at h and h/2 combined
    by Richardson extrapolation (error O(h⁴)), states from dopri5 at tight tolerance."""
    back = MultiHead(model.M, -model.W, beta=model.beta, kind=model.kind, geometry=model.geometry)

    def central(step):
        kw = dict(t1=step, method="dopri5", rtol=1e-13, atol=1e-15, dt=step / 4)
        return (fn(simulate(x, model, **kw).x[-1]) - fn(simulate(x, back, **kw).x[-1])) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_theorem11_finite_differences(rng, geometry):
    n, d, H = 8, 3, 3
    model = MultiHead(random_symmetric(rng, H, d, 0.7), beta=1.3, kind="usa", geometry=geometry)
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    # the identity itself, to round-off
    assert diag["rate_residual"] == pytest.approx(0.0, abs=1e-13 * diag["kinetic"])
    fd = flow_derivative(model, x, model.energy)
    assert fd == pytest.approx(diag["kinetic"], rel=1e-8)


@pytest.mark.parametrize("broken", ["C3", "C4"])
def test_theorem11_breaks_without_conditions(rng, broken):
    n, d, H = 8, 3, 2
    M = random_symmetric(rng, H, d)
    if broken == "C3":
        M = M + 0.8 * rng.standard_normal((H, d, d))
        model = MultiHead(M, beta=1.0)
    else:
        model = MultiHead(M, M + 0.8 * rng.standard_normal((H, d, d)), beta=1.0)
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    fd = flow_derivative(model, x, model.energy)
    assert fd == pytest.approx(diag["energy_rate"], rel=1e-7)  # the exact rate is still right
    assert abs(diag["rate_residual"]) > 1e-2 * diag["kinetic"]  # the identity is broken by O(1)


def test_theorem12_misalignment_formula(rng):
    """dE/dt = (1/n)Σ‖ẋ‖² − (1/n²)Σ⟨D_i, ẋ_i⟩ with D_i = Σ_h Σ_j e^{βs} Δ_h x_j (exact)."""
    n, d, H = 9, 3, 2
    M = random_symmetric(rng, H, d)
    Delta = 0.3 * rng.standard_normal((H, d, d))
    model = MultiHead(M, M + Delta, beta=0.9)
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    xdot = model.velocity(x)
    w = np.exp(model.beta * model.scores(x))
    D = np.einsum("hij,jd,hed->ie", w, x, Delta)
    predicted = diag["kinetic"] - np.sum(D * xdot) / n**2
    assert diag["energy_rate"] == pytest.approx(predicted, rel=1e-12)
    # and the lower bound with δ_V = Σ_h ‖Δ_h‖ exp(β‖M_h‖)
    delta_v = sum(np.linalg.norm(Dh, 2) * np.exp(model.beta * np.linalg.norm(Mh, 2)) for Dh, Mh in zip(Delta, M))
    speeds = np.linalg.norm(xdot, axis=1)
    assert diag["energy_rate"] >= np.sum(speeds * (speeds - delta_v)) / n - 1e-12


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_theorems16_17_per_head_rates(rng, geometry):
    n, d, H = 7, 4, 3
    model = MultiHead(random_symmetric(rng, H, d, 0.5), beta=1.1, geometry=geometry)
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    f = model.head_outputs(x)
    a = np.einsum("hid,id->hi", f, x)
    for h in range(H):
        if geometry == "sphere":
            pf = f[h] - a[h][:, None] * x
            own = np.sum(pf * pf, axis=1)
            cross = sum(np.einsum("id,id->i", f[h], f[k]) - a[h] * a[k] for k in range(H) if k != h)
        else:
            own = np.sum(f[h] * f[h], axis=1)
            cross = sum(np.einsum("id,id->i", f[h], f[k]) for k in range(H) if k != h)
        assert diag["head_energy_rate"][h] == pytest.approx(np.sum(own + cross) / n**3, rel=1e-11)
        fd = flow_derivative(model, x, lambda y, h=h: model.head_energies(y)[h])
        assert fd == pytest.approx(diag["head_energy_rate"][h], rel=1e-7)


def orthogonal_heads(d, H, rng, scale=1.0):
    """Heads M_h = scale · P_h on disjoint coordinate blocks, randomly rotated: M_h M_k = 0."""
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    blocks = np.array_split(np.arange(d), H)
    M = np.zeros((H, d, d))
    for h, b in enumerate(blocks):
        M[h][b, b] = scale
    return q @ M @ q.T


def test_orthogonal_heads_flat_monotone_sphere_not(rng):
    d, H, n = 4, 2, 6
    M = orthogonal_heads(d, H, rng, scale=2.0)
    assert np.abs(M[0] @ M[1]).max() < 1e-12
    flat_min, sphere_min = np.inf, np.inf
    for _ in range(200):
        x = sample_uniform(n, d=d, rng=rng)
        flat = diagnose(MultiHead(M, beta=1.5, geometry="flat"), x)["head_energy_rate"]
        sph = diagnose(MultiHead(M, beta=1.5, geometry="sphere"), x)["head_energy_rate"]
        flat_min, sphere_min = min(flat_min, flat.min()), min(sphere_min, sph.min())
    assert flat_min >= 0.0
    assert sphere_min < 0.0  # the radial shadow of the other head pulls E_h down


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), beta=st.floats(0.05, 3.0))
def test_radial_dominance_implies_per_head_monotonicity(seed, beta):
    """Condition 8 ⇒ dE_h/dt ≥ 0 for orthogonal heads on the sphere (token-wise)."""
    rng = np.random.default_rng(seed)
    d, H, n = 4, 2, 5
    model = MultiHead(orthogonal_heads(d, H, rng), beta=beta)
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    f = model.head_outputs(x)
    a = diag["radial_shadow"]
    pf2 = np.einsum("hid,hid->hi", f, f) - a**2
    token_rates = pf2 - a * (a.sum(0)[None] - a)  # n³ dE_h/dt per token (cross ⟨f,f⟩ terms vanish)
    ok = diag["rd_margin"] >= 0
    assert np.all(token_rates[ok] >= -1e-12 * np.abs(pf2).max())
    if np.all(diag["rd_margin_min"] >= 0):
        assert np.all(diag["head_energy_rate"] >= -1e-15)


def test_one_softmax_head_rate(rng):
    n, d = 9, 3
    model = MultiHead(random_symmetric(rng, 1, d), beta=1.4, kind="softmax")
    x = sample_uniform(n, d=d, rng=rng)
    diag = diagnose(model, x)
    Z = np.exp(model.beta * model.scores(x)[0]).sum(1)
    xdot = model.velocity(x)
    assert diag["energy_rate"] == pytest.approx(np.sum(Z / n**2 * np.sum(xdot**2, axis=1)), rel=1e-12)
    assert diag["energy_rate"] >= 0


def test_two_softmax_heads_caution_counterexample(rng):
    """docs/theory.md §2: with ≥ 2 softmax heads E_multi can decrease (n=4, d=3, H=2, β=1)."""
    M = np.array([np.diag([-0.071, -0.901, 0.906]), np.diag([0.059, 0.740, -0.662])])
    model = MultiHead(M, beta=1.0, kind="softmax")
    rates = [diagnose(model, sample_uniform(4, d=3, rng=rng),
                      include=["energy_rate"])["energy_rate"] for _ in range(3000)]
    assert min(rates) < 0


def test_diagnostics_shapes_and_cos_angle(rng):
    model = MultiHead(random_symmetric(rng, 3, 4), beta=0.5)
    x = sample_uniform(10, d=4, rng=rng)
    diag = diagnose(model, x)
    assert diag["energy"].shape == (3,) and diag["entropy"].shape == (3, 10)
    f = model.head_outputs(x)
    np.testing.assert_allclose(diag["cos_angle"], np.einsum("hid,id->hi", f, x) / np.linalg.norm(f, axis=-1))
    assert diag["energy_multi"] == pytest.approx(model.energy(x))


def test_diagnostics_saved_along_trajectory(rng):
    from particles import diagnostics_fn

    model = MultiHead(random_symmetric(rng, 2, 3), beta=1.0)
    x0 = sample_uniform(10, d=3, rng=rng)
    traj = simulate(x0, model, t1=2.0, dt=0.01, save=SaveAt(ts=np.linspace(0, 2, 5), x=False,
                                                            fn=diagnostics_fn(model, ["energy_multi", "kinetic"])))
    assert traj.x is None and traj.saved["energy_multi"].shape == (5,)
    E = traj.saved["energy_multi"]
    assert np.all(np.diff(E) >= -1e-13 * E[-1])  # Theorem 11: E rises (up to round-off once converged)
    assert E[-1] > E[0]
