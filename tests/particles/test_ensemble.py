"""Ensemble: S independent systems in one field equal S MultiHead fields, at every beta."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from particles import Ensemble, MultiHead, simulate


@pytest.mark.parametrize("kind", ["softmax", "usa", "relu", "relu_rownorm"])
def test_ensemble_equals_one_model_per_system(rng, kind):
    H, n, d = 2, 7, 3
    M = rng.standard_normal((H, d, d))
    W = rng.standard_normal((H, d, d))
    betas = np.array([0.0, 0.7, 50.0, 2000.0])  # 2000: the Cauchy–Schwarz shift overshoots, rows are redone
    if kind == "usa":
        betas = np.array([0.0, 0.7, 20.0, 60.0])  # USA weights e^{beta s} themselves: beta |s| < 700
    x = rng.standard_normal((len(betas), n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    ens = Ensemble(M, W, beta=betas, kind=kind, chunk=3)
    v = ens.velocity(x)
    for s, beta in enumerate(betas):
        ref = MultiHead(M, W, beta=beta, kind=kind, summation="exact").velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-11, atol=1e-12 * max(1.0, np.abs(ref).max()))


def test_ensemble_trajectories_equal_single_runs(rng):
    M = np.eye(3)
    betas = np.array([0.5, 4.0])
    x0 = rng.standard_normal((2, 6, 3))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    run = simulate(x0, Ensemble(M, beta=betas), t1=1.0, dt=0.05)
    for s, beta in enumerate(betas):
        one = simulate(x0[s], MultiHead(M, beta=beta, kind="softmax"), t1=1.0, dt=0.05)
        np.testing.assert_allclose(run.x[-1, s], one.x[-1], atol=1e-12)


@pytest.mark.parametrize("d", [3, 7])  # the coordinate-major (d <= 4) and the token-major pass
def test_ensemble_usa_overflow_names_the_system(rng, d):
    from particles import SolverError

    x = np.tile(np.eye(d)[None, :2], (3, 1, 1))
    with pytest.raises(SolverError, match="system 1"):
        Ensemble(np.eye(d), beta=[1.0, 800.0, 2.0], kind="usa").velocity(x)


@pytest.mark.parametrize("d", [3, 7])
def test_usa_rows_scaled_one_by_one_when_the_shift_passes_float64(d):
    """A negative USA head on flat tokens: the Cauchy–Schwarz shift (900) is past the float64
    range, every row's weight (log Z_i ~ 450) is not, so the output is scaled row by row."""
    x = np.zeros((1, 3, d))
    x[0, 0, 0], x[0, 1, 0], x[0, 2, :2] = 10.0, -5.0, (-5.0, 1.0)  # every row's largest logit is 450
    M = -np.eye(d)
    v = Ensemble(M, beta=[9.0], kind="usa", geometry="flat").velocity(x)
    ref = MultiHead(M, beta=9.0, kind="usa", geometry="flat", summation="exact").velocity(x[0])
    assert np.all(np.isfinite(v)) and np.abs(ref).max() > 1e150
    # entries 1e-196 of their row's largest one fall under the one shift of the system: norm-wise
    np.testing.assert_allclose(v[0], ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_scalar_heads_skip_their_gemm_and_agree(rng, kind):
    # M = 0.7 I (scalar, no GEMM) and W = 1.3 I against the same heads through MultiHead
    d, n = 4, 6
    x = rng.standard_normal((3, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    M, W = 0.7 * np.eye(d), 1.3 * np.eye(d)
    betas = np.array([0.0, 2.0, 30.0])
    v = Ensemble(M, W, beta=betas, kind=kind).velocity(x)
    for s, beta in enumerate(betas):
        ref = MultiHead(M, W, beta=beta, kind=kind, summation="exact").velocity(x[s])
        # the tangent projection removes each row's radial part (USA at beta = 30: e^21 x_i / n, against
        # tangent entries ~1e3): the round-off of the unprojected output is the floor of the comparison
        raw = MultiHead(M, W, beta=beta, kind=kind, geometry="flat", summation="exact").velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-11, atol=16 * np.finfo(float).eps * np.abs(raw).max())


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("d", [2, 3, 7])
@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_fused_scalar_heads_equal_one_model_per_system(rng, kind, d, geometry):
    # scalar heads take the fused pass (coordinate loops for d <= 4, buffers reused across chunks of
    # different sizes): against MultiHead system by system, with a negative head, beta = 0 and, for
    # softmax, a beta whose Cauchy-Schwarz shift underflows whole rows (they are redone)
    n = 9
    M = np.stack([0.7 * np.eye(d), -1.2 * np.eye(d)])
    W = np.stack([1.3 * np.eye(d), 0.4 * np.eye(d)])
    betas = np.array([0.0, 0.7, 30.0, 2000.0]) if kind == "softmax" else np.array([0.0, 0.7, 5.0, 20.0])
    x = rng.standard_normal((len(betas), n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    if geometry == "flat":
        x *= rng.uniform(0.5, 1.0, (len(betas), n, 1))
    ens = Ensemble(M, W, beta=betas, kind=kind, geometry=geometry, chunk=3)
    assert ens._scalar_heads is not None
    v = ens.velocity(x)
    for s, beta in enumerate(betas):
        ref = MultiHead(M, W, beta=beta, kind=kind, geometry=geometry, summation="exact").velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(ref).max()))



def test_workspace_reuses_buffers_and_keeps_none_beyond_its_budget():
    from particles._model.ensemble_kernels import Workspace

    work = Workspace(keep=100)
    a = work.get("a", (4, 5))
    b = work.get("a", (3, 2))  # a smaller request is a view of the same buffer
    assert np.shares_memory(a, b) and b.shape == (3, 2)
    big = work.get("b", (11, 10))  # above the budget: a fresh array, not retained
    assert big.shape == (11, 10) and not np.shares_memory(big, work.get("b", (11, 10)))


def test_workspace_views_follow_their_buffer_when_it_grows():
    from particles._model.ensemble_kernels import Workspace

    work = Workspace(keep=100)
    small = work.get("a", (2, 3))
    assert work.get("a", (2, 3)) is small  # a shape asked for before: the same view
    grown = work.get("a", (5, 5))  # a larger request replaces the buffer
    again = work.get("a", (2, 3))
    assert np.shares_memory(again, grown) and not np.shares_memory(again, small)
    assert not np.shares_memory(work.get("b", (2, 3)), again)  # names never share


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_few_coordinate_shift_is_each_systems_own_when_norms_differ(monkeypatch, rng, kind):
    """d <= 4 takes one shift per chunk when its tokens' norms are close; flat tokens of norms 1
    and 10 in one chunk at beta = 9 (a shared shift would overshoot system 0 by 891 and underflow
    its rows) get their own bound, and no row needs the exact redo."""
    from particles._model import ensemble_kernels

    def no_redo(*args):
        raise AssertionError("a row underflowed under its system's own shift")

    x = rng.standard_normal((2, 5, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    x[1] *= 10.0
    ens = Ensemble(np.eye(3), beta=[9.0, 0.09], kind=kind, geometry="flat")
    ref = [MultiHead(np.eye(3), beta=b, kind=kind, geometry="flat", summation="exact").velocity(x[s])
           for s, b in enumerate(ens.beta)]
    monkeypatch.setattr(ensemble_kernels, "_redo_rows", no_redo)
    v = ens.velocity(x)
    for s in range(2):
        np.testing.assert_allclose(v[s], ref[s], rtol=1e-11, atol=1e-13 * np.abs(ref[s]).max())


@given(seed=st.integers(0, 2**31), scalar=st.booleans(), beta=st.floats(0.0, 9.0))
@settings(max_examples=30, deadline=None)
def test_usa_field_depends_on_directions_only(seed, scalar, beta):
    """Off the sphere (an explicit stage) the USA velocity is the one at x_i/|x_i|: degree-0
    homogeneous in every token, so the radial direction has no dynamics."""
    r = np.random.default_rng(seed)
    S, n, d = 2, 6, 3
    M = np.eye(d) * 1.3 if scalar else r.standard_normal((d, d))
    ens = Ensemble(M, beta=[beta, 0.5 * beta], kind="usa")
    x = r.standard_normal((S, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    off = x * r.uniform(0.8, 1.25, (S, n, 1))
    v = ens.velocity(x)
    np.testing.assert_allclose(ens(0.0, off), v, rtol=1e-12, atol=1e-12 * np.abs(v).max())


@given(seed=st.integers(0, 2**31), d=st.integers(2, 4), kind=st.sampled_from(["softmax", "usa"]),
       flat=st.booleans(), chunk=st.integers(1, 5), spread=st.sampled_from([1e-9, 0.1, 3.0]))
@settings(max_examples=60, deadline=None)
def test_few_coordinate_pass_equals_one_model_per_system(seed, d, kind, flat, chunk, spread):
    """The coordinate-major pass (d <= 4) on random stacks: chunks of any size (the last one
    short), token norms from equal to far apart (the shared and the per-system shift), two heads
    of either sign: each system's velocity is MultiHead's, to the round-off of the unprojected
    output (the tangent projection cancels its radial part)."""
    r = np.random.default_rng(seed)
    S, n = 7, 5
    x = r.standard_normal((S, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    if flat:
        x *= np.exp(spread * r.uniform(-0.5, 0.5, (S, 1, 1)))  # systems of different scales
    geometry = "flat" if flat else "sphere"
    M = np.stack([0.8 * np.eye(d), -0.3 * np.eye(d)])
    W = np.stack([1.0 * np.eye(d), 0.6 * np.eye(d)])
    betas = r.uniform(0.0, 4.0 if kind == "usa" else 12.0, S)
    v = Ensemble(M, W, beta=betas, kind=kind, geometry=geometry, chunk=chunk).velocity(x)
    for s, beta in enumerate(betas):
        ref = MultiHead(M, W, beta=beta, kind=kind, geometry=geometry, summation="exact").velocity(x[s])
        raw = MultiHead(M, W, beta=beta, kind=kind, geometry="flat", summation="exact").velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-10, atol=64 * np.finfo(float).eps * np.abs(raw).max())


def test_usa_tight_cluster_contracts_tangentially_only():
    """A tight USA cluster of m = n tokens: the Jacobian of the ambient field has its largest
    eigenvalues at -e^beta m/n (the tangent contraction, twice per token in d = 3 minus the
    common motion) and a zero eigenvalue per token (radial); the polynomial extension would add
    -2 e^beta m/n per token (normal contraction)."""
    from tests.particles.test_rkc import _jacobian

    x = np.array([[1.0, 1e-4, 0.0], [1.0, -1e-4, 0.0], [1.0, 0.0, 1e-4], [1.0, 0.0, -1e-4]])[None]
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    beta = 6.0
    ev = np.linalg.eigvals(_jacobian(Ensemble(np.eye(3), beta=[beta], kind="usa"), x, h=1e-8)).real
    rate = np.exp(beta)  # sum_j a_ij = e^beta m / n with m = n
    ev = np.sort(ev)
    np.testing.assert_allclose(ev[:6], -rate, rtol=1e-3)  # 3 relative tangent modes x 2 tangent dims
    np.testing.assert_allclose(ev[6:], 0.0, atol=1e-3 * rate)  # 4 radial + 2 common tangent


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("d", [2, 8])
def test_velocities_do_not_alias_the_kernel_buffers(rng, kind, d):
    """The fused pass works in per-thread buffers: a returned velocity stays what it was after
    later evaluations (two heads, chunks of 3), and equals a fresh ensemble's."""
    S, n = 7, 5
    M = np.stack([0.7 * np.eye(d), -0.4 * np.eye(d)])
    W = np.stack([1.0 * np.eye(d), 0.5 * np.eye(d)])
    x1, x2 = (rng.standard_normal((S, n, d)) for _ in range(2))
    x1 /= np.linalg.norm(x1, axis=-1, keepdims=True)
    x2 /= np.linalg.norm(x2, axis=-1, keepdims=True)
    ens = Ensemble(M, W, beta=np.linspace(0.5, 6.0, S), kind=kind, chunk=3)
    v1 = ens.velocity(x1)
    kept = v1.copy()
    v2 = ens.velocity(x2)
    np.testing.assert_array_equal(v1, kept)
    assert not np.shares_memory(v1, v2)
    for s in range(S):
        ref = MultiHead(M, W, beta=ens.beta[s], kind=kind, summation="exact").velocity(x2[s])
        np.testing.assert_allclose(v2[s], ref, rtol=1e-11, atol=1e-13 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("d", [3, 7])  # both layouts
def test_weighted_sums_that_underflow_are_refused(rng, d):
    """The exact pass that redoes underflowed rows knows no weights: a weighted evaluation whose
    sums underflow (a negative head at large beta) raises instead of returning wrong rows."""
    from particles import SolverError

    x = rng.standard_normal((2, 6, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    mild = Ensemble(-np.eye(d), beta=[1.0, 3.0], kind="softmax")
    np.testing.assert_allclose(mild._velocity(x, weights=np.ones((2, 6)), n=6), mild.velocity(x), atol=1e-12)
    assert np.all(np.isfinite(Ensemble(-np.eye(d), beta=[1.0, 2000.0], kind="softmax").velocity(x)))
    with pytest.raises(SolverError, match="weighted exp sum underflowed"):
        Ensemble(-np.eye(d), beta=[1.0, 2000.0], kind="softmax")._velocity(x, weights=np.ones((2, 6)), n=6)


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("block", [1, 3, 7])
def test_few_coordinate_blocks_give_the_one_block_output_bitwise(monkeypatch, rng, kind, block):
    """The d <= 4 pass runs its GEMM, exp and GEMM over blocks of L2_LOGITS // n^2 systems (the last one
    short): the same per-system BLAS calls as one block of the whole chunk, so the same bits; and each
    system's velocity is MultiHead's."""
    from particles._model import ensemble_kernels

    S, n, d = 7, 5, 3
    x = rng.standard_normal((S, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    betas = rng.uniform(0.0, 4.0 if kind == "usa" else 12.0, S)
    weights = rng.uniform(0.5, 2.0, (S, n))  # the weighted sums (merged tokens) take the same blocks
    M, W = np.stack([0.8 * np.eye(d), 0.3 * np.eye(d)]), np.stack([np.eye(d), 0.6 * np.eye(d)])
    ens = Ensemble(M, W, beta=betas, kind=kind)
    monkeypatch.setattr(ensemble_kernels, "L2_LOGITS", 2**40)
    whole, whole_w = ens.velocity(x), ens._velocity(x, weights=weights, n=n).copy()
    monkeypatch.setattr(ensemble_kernels, "L2_LOGITS", block * n * n)
    blocked, blocked_w = ens.velocity(x), ens._velocity(x, weights=weights, n=n).copy()
    np.testing.assert_array_equal(blocked, whole)
    np.testing.assert_array_equal(blocked_w, whole_w)
    for s, beta in enumerate(betas):
        ref = MultiHead(M, W, beta=beta, kind=kind, summation="exact").velocity(x[s])
        np.testing.assert_allclose(blocked[s], ref, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(ref).max()))
