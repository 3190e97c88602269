r"""The special token configurations the closed forms of :mod:`particles.theory` are stated on:
equiangular tokens (every pairwise overlap ρ), orthonormal tokens, and the mean overlap of a state."""

from __future__ import annotations

import numpy as np

from .declarations import Relation, declare
from .params import NONE, AnyOf, Integer, Interval
from .params_data import Points, Seed

__all__ = ["equiangular_tokens", "orthogonal_tokens", "mean_rho"]


@declare(n=Integer(2), rho=Interval(-1, 1, closed="neither"), d=AnyOf(NONE, Integer(2)), relations=[
    Relation(("rho", "n"), lambda rho, n: rho > -1.0 / (n - 1), "must exceed -1/(n-1) (the Gram matrix is then "
             "positive definite)", breaks={"rho": -0.9}),
    Relation(("d", "n"), lambda d, n: d is None or d >= n, "must be >= n (n equiangular vectors span n dimensions)",
             breaks={"d": 2})])
def equiangular_tokens(n: int, rho: float, d: int | None = None) -> np.ndarray:
    r"""n unit vectors with :math:`\langle x_i, x_j\rangle = \rho` for i ≠ j, in R^d (d ≥ n).

    Rows of the Cholesky factor of the Gram matrix :math:`(1-\rho)I + \rho\mathbf 1\mathbf 1^\top`,
    padded with zeros to d columns. Needs :math:`-1/(n-1) < \rho < 1`.

    Examples
    --------
    >>> x = equiangular_tokens(3, 0.25)
    >>> float(np.round(x[0] @ x[1], 12))
    0.25
    """
    d = n if d is None else d
    G = (1 - rho) * np.eye(n) + rho * np.ones((n, n))
    L = np.linalg.cholesky(G)
    x = np.zeros((n, d))
    x[:, :n] = L
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@declare(n=Integer(1), d=AnyOf(NONE, Integer(1)), rng=Seed(), relations=[
    Relation(("d", "n"), lambda d, n: d is None or d >= n, "must be >= n (n orthonormal vectors need n dimensions)",
             breaks={"d": 2, "n": 3})])
def orthogonal_tokens(n: int, d: int | None = None, rng=None) -> np.ndarray:
    """n orthonormal tokens in R^d (d ≥ n): the first n basis vectors, randomly rotated if ``rng``."""
    d = n if d is None else d
    x = np.eye(d)[:n]
    if rng is not None:
        q, r = np.linalg.qr(np.random.default_rng(rng).standard_normal((d, d)))
        x = x @ (q * np.sign(np.diag(r))).T
    return x


@declare(x=Points(atol=1e-8, min_n=2))
def mean_rho(x) -> float:
    r"""Mean off-diagonal overlap :math:`\frac{2}{n(n-1)}\sum_{i<j}\langle x_i, x_j\rangle` (ρ of equiangular data)."""
    n = len(x)
    s = x.sum(axis=0)
    return float((s @ s - np.einsum("ij,ij->", x, x)) / (n * (n - 1)))
