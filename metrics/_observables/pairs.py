r"""Pair statistics of stacks of systems: the clustered-pair fraction and ε-connected cluster counts from
Gram matrices (the statistics of :func:`metrics.phase_diagram`), and stacks of systems sampled in the
coordinates of their span (:func:`span_systems`)."""

from __future__ import annotations

import numpy as np

from particles.validation import Interval, InvalidParameterError, check_points, check_real_array, declare

from .clustering import component_counts

__all__ = ["clustered_pair_fraction", "pair_fraction", "gram", "cluster_counts", "span_systems"]


@declare(rho_c=Interval(-1, 1, hint="rho_c is a cosine threshold, e.g. 0.999."))
def clustered_pair_fraction(x, *, rho_c: float = 0.999) -> np.ndarray:
    r"""Fraction of clustered pairs of each system of a stack ``x`` (S, n, d), shape (S,):

    .. math:: \frac{2}{n(n-1)}\,\#\{i<j : \langle x_i, x_j\rangle \ge \rho_c\}.

    Examples
    --------
    >>> x = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    >>> clustered_pair_fraction(x).round(4).tolist()
    [0.3333]
    """
    caller = "clustered_pair_fraction"
    x = check_real_array(x, "x", caller, ndim=3, expected="an array of shape (S, n, d)")
    if x.shape[0] < 1 or x.shape[1] < 2 or x.shape[2] < 1:
        raise InvalidParameterError(
            f"x of {caller} must have shape (S, n, d) with S >= 1 systems of n >= 2 tokens (pairs); got {x.shape}."
        )
    check_points(x.reshape(-1, x.shape[2]), "x", caller, atol=1e-8)
    return pair_fraction(x, rho_c)


def pair_fraction(x: np.ndarray, rho_c: float, G: np.ndarray | None = None) -> np.ndarray:
    """Clustered-pair fraction per system over the pairs i < j (from the Gram matrices G if given)."""
    n = x.shape[1]
    G = gram(x) if G is None else G
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    return np.count_nonzero((G >= rho_c) & upper, axis=(1, 2)) / (n * (n - 1) / 2)


def gram(x: np.ndarray) -> np.ndarray:
    """Gram matrices of a stack (S, n, d) (the transposed operand copied: a strided one costs the
    small batched GEMMs about twice as much)."""
    return np.matmul(x, np.ascontiguousarray(x.transpose(0, 2, 1)))


def cluster_counts(x: np.ndarray, eps: float, G: np.ndarray | None = None) -> np.ndarray:
    """ε-connected components per system (geodesic distance <= ε ⇔ ⟨x_i, x_j⟩ >= cos ε), from
    the Gram matrices G if given."""
    return component_counts((gram(x) if G is None else G) >= np.cos(eps)).astype(float)


def span_systems(c: int, n: int, d: int, init: str, rng: np.random.Generator) -> np.ndarray:
    r"""c systems in r = min(d, n) coordinates.

    With M = W = I every velocity lies in :math:`\mathrm{span}\{x_j\}`, so that span is
    invariant and the flow of n tokens in :math:`\mathbb R^d`, d > n, is the flow of their
    coordinates in an orthonormal basis of it (the Gram matrix, hence every statistic, is
    unchanged). Those coordinates are sampled directly: for Gaussian rows
    :math:`G\in\mathbb R^{n\times d}`, :math:`GG^\top = LL^\top` with the Bartlett factor L
    (lower triangular, :math:`L_{ii}\sim\chi_{d-i}` for i = 0..n-1, :math:`L_{ij}\sim N(0,1)`
    below the diagonal), so normalised rows of L are i.i.d. uniform tokens up to a rotation:
    O(n²) draws per system instead of O(nd).
    """
    if init == "equiangular":  # orthonormal tokens (ρ = 0) under a random rotation of R^n
        q, r = np.linalg.qr(rng.standard_normal((c, n, n)))
        return q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    if d <= n:
        x = rng.standard_normal((c, n, d))
    else:
        x = np.tril(rng.standard_normal((c, n, n)), -1)
        idx = np.arange(n)
        x[:, idx, idx] = np.sqrt(rng.chisquare(d - idx, size=(c, n)))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
