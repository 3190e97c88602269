"""Critical points: Riemannian Hessian vs finite differences and closed-form spectra; Newton convergence."""

import numpy as np
import pytest

from particles import (
    MultiHead,
    field_jacobian,
    find_critical_point,
    hessian_spectrum,
    normalize,
    project_tangent,
    riemannian_hessian,
    sample_uniform,
    tangent_basis,
)
from tests.helpers import random_symmetric


def antipodal(n, k, d, rng):
    p = sample_uniform(1, d=d, rng=rng)[0]
    return np.array([p] * k + [-p] * (n - k))


def antipodal_spectrum(n, k, d, lambdas, beta):
    """Closed form of the module docstring (each value with multiplicity d − 1)."""
    lam = np.asarray(lambdas, dtype=float)
    b = beta * lam
    c_plus = np.sum(lam / n**2 * (k * np.exp(b) - (n - k) * np.exp(-b)))
    c_minus = np.sum(lam / n**2 * ((n - k) * np.exp(b) - k * np.exp(-b)))
    if k == n:
        vals = [0.0] + [-np.sum(lam * np.exp(b)) / n] * (n - 1)
    else:
        vals = [-c_plus] * (k - 1) + [-c_minus] * (n - k - 1) + [0.0, np.sum(lam * np.exp(-b)) / n]
    return np.sort(np.repeat(vals, d - 1))


def test_hessian_matches_finite_differences_of_the_gradient(rng):
    """At a generic (non-critical) state, Hess E[ξ] = ∇_ξ grad E: central differences along retractions."""
    n, d = 5, 3
    model = MultiHead(random_symmetric(rng, 2, d), beta=0.8)
    x = sample_uniform(n, d=d, rng=rng)
    hess, B = riemannian_hessian(model, x)
    assert np.allclose(hess, hess.T)

    def rgrad(y):
        return project_tangent(y, model.energy_gradient(y))

    h = 1e-5
    fd = np.empty_like(hess)
    for col, (k, b) in enumerate((k, b) for k in range(n) for b in range(d - 1)):
        dx = np.zeros_like(x)
        dx[k] = h * B[k, b]
        diff = (rgrad(normalize(x + dx)) - rgrad(normalize(x - dx))) / (2 * h)
        fd[:, col] = np.einsum("iad,id->ia", B, project_tangent(x, diff)).ravel()
    np.testing.assert_allclose(fd, hess, atol=1e-8 * np.abs(hess).max())
    # the field of aligned USA heads is n grad E: its Jacobian is n Hess
    J, _ = field_jacobian(model, x)
    np.testing.assert_allclose(J, n * hess, atol=1e-7 * n * np.abs(hess).max())


@pytest.mark.parametrize("n,k,d", [(5, 2, 3), (6, 3, 4), (6, 1, 3), (4, 4, 3), (7, 6, 2)])
@pytest.mark.parametrize("lambdas,beta", [([1.0], 1.0), ([1.0, 0.4], 2.0), ([0.5, -0.3], 1.5)])
def test_antipodal_and_consensus_spectra(rng, n, k, d, lambdas, beta):
    model = MultiHead.scalar(lambdas, d=d, beta=beta)
    spec = hessian_spectrum(model, antipodal(n, k, d, rng))
    assert spec.grad_norm < 1e-14
    expected = antipodal_spectrum(n, k, d, lambdas, beta)
    np.testing.assert_allclose(spec.eigenvalues, expected, atol=1e-12 * np.abs(expected).max())
    tol = spec.tol
    assert spec.index == int(np.sum(expected > tol)) and spec.nullity == int(np.sum(np.abs(expected) <= tol))


@pytest.mark.parametrize("n,d", [(4, 3), (4, 5), (5, 4), (6, 7)])
def test_simplex_spectrum(rng, n, d):
    """Regular simplex: Q(ξ) = (λe^{bρ}/n²)[(b/2)Σ_{i≠j}(G'_ij)² + |Σξ_i|²], index = n(d−1) − nullity."""
    lam, beta = 0.9, 1.3
    rho = -1 / (n - 1)
    # centred basis vectors e_i − 1/n span 1^⊥ (dimension n − 1): write them in a basis of it
    C = np.eye(n) - 1.0 / n
    U = np.linalg.svd(C)[0][:, : n - 1]
    x = np.zeros((n, d))
    x[:, : n - 1] = normalize(C @ U)
    assert np.allclose(x @ x.T, (1 - rho) * np.eye(n) + rho, atol=1e-12)
    model = MultiHead.scalar([lam], d=d, beta=beta)
    hess, B = riemannian_hessian(model, x)
    b = beta * lam
    for _ in range(5):
        c = rng.standard_normal((n, d - 1))
        xi = np.einsum("ia,iad->id", c, B)
        Gp = xi @ x.T + x @ xi.T
        np.fill_diagonal(Gp, 0.0)
        Q = lam * np.exp(b * rho) / n**2 * (b / 2 * np.sum(Gp**2) + np.sum(xi.sum(0) ** 2))
        assert c.ravel() @ hess @ c.ravel() == pytest.approx(Q, rel=1e-11)
    spec = hessian_spectrum(model, x)
    nullity = d * (d - 1) // 2 - (d - n + 1) * (d - n) // 2  # rotations minus the stabiliser
    assert spec.nullity == nullity and spec.index == n * (d - 1) - nullity
    if d > n - 1:  # out-of-span translations ξ_i = w: eigenvalue λe^{bρ}/n
        assert np.min(np.abs(spec.eigenvalues - lam * np.exp(b * rho) / n)) < 1e-12


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_newton_converges_quadratically_to_antipodal(rng, kind):
    n, k, d = 6, 2, 3
    model = MultiHead.scalar([1.0], d=d, beta=1.0, kind=kind)
    x0 = normalize(antipodal(n, k, d, rng) + 0.03 * rng.standard_normal((n, d)))
    cp = find_critical_point(model, x0)
    assert cp.converged and cp.residuals[-1] < 1e-12 and cp.n_iter <= 12
    r = cp.residuals  # measured (USA): 9.4e-2, 9.4e-4, 6.3e-10, 2.3e-16
    above = r[1:] > 1e-14  # the last step lands on round-off
    assert np.all(r[1:][above] <= 10 * r[:-1][above] ** 2)  # quadratic convergence, r_{k+1} <= C r_k²
    # the limit is an antipodal pair of clusters of sizes k, n − k
    G = cp.x @ cp.x.T
    assert np.allclose(np.abs(G), 1, atol=1e-9) and sorted([np.sum(G[0] > 0), np.sum(G[0] < 0)]) == [k, n - k]
    unstable = int(np.sum(cp.jacobian_eigenvalues.real > 1e-8 * np.abs(cp.jacobian_eigenvalues).max()))
    if kind == "usa":
        expected = antipodal_spectrum(n, k, d, [1.0], 1.0)
        assert cp.spectrum.index == int(np.sum(expected > cp.spectrum.tol)) == unstable
    else:
        assert cp.spectrum is None and unstable >= d - 1  # the clusters still attract


def test_newton_from_a_plateau_state_of_a_misaligned_model(rng):
    """Non-gradient field (W ≠ M): Newton with the finite-difference Jacobian still finds a zero."""
    M = np.eye(3)[None]
    model = MultiHead(M, M + 0.2 * np.diag([1.0, -1.0, 0.5])[None], beta=1.0)
    x0 = normalize(antipodal(5, 3, 3, rng) + 0.02 * rng.standard_normal((5, 3)))
    cp = find_critical_point(model, x0)
    assert cp.converged and np.abs(model.velocity(cp.x)).max() < 1e-11 and cp.spectrum is None


def test_tangent_basis_is_orthonormal(rng):
    x = sample_uniform(6, d=4, rng=rng)
    B = tangent_basis(x)
    np.testing.assert_allclose(np.einsum("iad,ibd->iab", B, B), np.broadcast_to(np.eye(3), (6, 3, 3)), atol=1e-14)
    np.testing.assert_allclose(np.einsum("iad,id->ia", B, x), 0, atol=1e-14)


def test_bad_input(rng):
    M = random_symmetric(rng, 1, 3)
    with pytest.raises(ValueError, match="'model' parameter of riemannian_hessian: M must be symmetric"):
        riemannian_hessian(MultiHead(M + np.triu(np.ones((3, 3)), 1), beta=1.0), np.eye(3))
    with pytest.raises(ValueError, match="must have kind in \\['usa'\\]"):
        hessian_spectrum(MultiHead(M, beta=1.0, kind="softmax"), np.eye(3))
    with pytest.raises(ValueError, match="geometry in \\['sphere'\\]"):
        find_critical_point(MultiHead(M, beta=1.0, geometry="flat"), np.eye(3))
    with pytest.raises(ValueError, match="x0 must lie on the unit sphere"):
        find_critical_point(MultiHead(M, beta=1.0), 2 * np.eye(3))
    with pytest.raises(ValueError, match="'tol' parameter of find_critical_point"):
        find_critical_point(MultiHead(M, beta=1.0), np.eye(3), tol=0.0)
