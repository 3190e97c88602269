r"""Cluster structure of point clouds on the sphere, through scikit-learn.

Clusters are the connected components of the graph joining points at geodesic distance
:math:`\le \varepsilon` (DBSCAN with ``min_samples=1``). On the unit sphere the geodesic
threshold ε is the chord threshold :math:`2\sin(\varepsilon/2)`, so the neighbour search
runs on Euclidean coordinates with a tree (no n×n distance matrix).
"""

from __future__ import annotations

import numpy as np

from particles.validation import InvalidParameterError, check_param, check_points, check_weights

__all__ = ["cluster_labels", "n_clusters", "n_clusters_batch", "cluster_sizes", "silhouette"]


def cluster_labels(x, *, eps: float = 1e-2) -> np.ndarray:
    r"""Labels 0..k−1 of the ε-connected components (geodesic ε) of ``x``.

    Parameters
    ----------
    x : ndarray of shape (n, d), unit rows
    eps : float in (0, π]
        Geodesic linking distance.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [1.0, 1e-4], [0.0, 1.0]])
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> cluster_labels(x).tolist()
    [0, 0, 1]
    """
    from sklearn.cluster import DBSCAN

    x = check_points(x, "x", "cluster_labels", atol=1e-8)
    eps = check_param(eps, "eps", "cluster_labels", low=0.0, high=np.pi, low_open=True)
    chord = 2.0 * np.sin(eps / 2.0)
    labels = DBSCAN(eps=chord, min_samples=1, metric="euclidean").fit(x).labels_
    # relabel by first appearance so that labels are deterministic
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(np.argsort(first))
    return order[np.searchsorted(np.unique(labels), labels)]


def n_clusters(x, weights=None, *, eps: float = 1e-2) -> int:
    r"""Number of ε-connected components :math:`k` (weights are ignored: components are
    a property of the support)."""
    return int(cluster_labels(x, eps=eps).max() + 1)


def cluster_sizes(x, weights=None, *, eps: float = 1e-2) -> np.ndarray:
    r"""Mass of each cluster, :math:`\sum_{i\in C_k} w_i`, sorted decreasingly (sums to 1)."""
    labels = cluster_labels(x, eps=eps)
    w = check_weights(weights, len(labels), caller="cluster_sizes")
    return np.sort(np.bincount(labels, weights=w))[::-1]


def silhouette(x, labels=None, *, eps: float = 1e-2) -> float:
    r"""Mean silhouette coefficient with the geodesic metric (scikit-learn).

    :math:`s_i = (b_i - a_i)/\max(a_i, b_i)`, :math:`a_i` mean intra-cluster and
    :math:`b_i` nearest-cluster mean geodesic distance. Needs 2 ≤ k ≤ n − 1 clusters.
    """
    from sklearn.metrics import silhouette_score

    from particles import geodesic_distance

    x = check_points(x, "x", "silhouette", atol=1e-8)
    labels = cluster_labels(x, eps=eps) if labels is None else np.asarray(labels)
    k = len(np.unique(labels))
    if not 2 <= k <= len(x) - 1:
        raise InvalidParameterError(
            f"silhouette needs between 2 and n - 1 = {len(x) - 1} clusters (inclusive); got {k}. "
            "Change eps or pass labels."
        )
    D = geodesic_distance(x[:, None, :], x[None, :, :])
    np.fill_diagonal(D, 0.0)
    return float(silhouette_score(D, labels, metric="precomputed"))


def n_clusters_batch(x, *, eps: float = 1e-2) -> np.ndarray:
    r"""Cluster counts of a stack of systems ``x`` of shape (S, n, d), shape (S,).

    On S^1 (d = 2) this is vectorised: sort the angles, and the ε-connected components
    are the arcs between consecutive gaps wider than ε (a full circle without such a gap
    is one cluster). For d > 2 it loops over :func:`n_clusters`.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise InvalidParameterError(f"x of n_clusters_batch must have shape (S, n, d); got {x.shape}.")
    eps = check_param(eps, "eps", "n_clusters_batch", low=0.0, high=np.pi, low_open=True)
    if x.shape[2] != 2:
        return np.array([n_clusters(xs, eps=eps) for xs in x])
    theta = np.sort(np.arctan2(x[..., 1], x[..., 0]), axis=1)
    gaps = np.diff(theta, axis=1, append=theta[:, :1] + 2 * np.pi)
    wide = (gaps > eps).sum(axis=1)
    return np.maximum(wide, 1)
