"""Clustering metrics: known cluster counts, sizes, invariances."""

import numpy as np
import pytest

from metrics import cluster_labels, cluster_sizes, leaders, mean_entropy, n_clusters, silhouette
from particles import InvalidParameterError, MultiHead, normalize, sample_uniform


def caps(rng, k, per, d=3, spread=1e-4):
    centres = sample_uniform(k, d, rng)
    pts = np.repeat(centres, per, axis=0) + spread * rng.standard_normal((k * per, d))
    return normalize(pts), np.repeat(np.arange(k), per)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_separated_caps_give_k_clusters(rng, k):
    x, truth = caps(rng, k, 10)
    assert n_clusters(x, eps=1e-2) == k
    labels = cluster_labels(x, eps=1e-2)
    # same partition as the truth, up to relabelling
    assert len({(a, b) for a, b in zip(labels, truth)}) == k


def test_invariances(rng):
    x, _ = caps(rng, 4, 6)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    perm = rng.permutation(len(x))
    assert n_clusters(x @ q.T) == n_clusters(x[perm]) == 4
    np.testing.assert_allclose(cluster_sizes(x @ q.T), cluster_sizes(x))


def test_cluster_sizes_sum_to_one(rng):
    x, _ = caps(rng, 3, 5)
    w = rng.uniform(size=len(x))
    sizes = cluster_sizes(x, w / w.sum())
    assert sizes.sum() == pytest.approx(1.0) and np.all(np.diff(sizes) <= 0)


def test_silhouette_known_and_errors(rng):
    x, _ = caps(rng, 3, 8)
    assert silhouette(x) > 0.99  # tight, far apart caps
    with pytest.raises(InvalidParameterError, match="Valid|between 2 and"):
        silhouette(caps(rng, 1, 5)[0])


def test_entropy_and_leaders(rng):
    n = 12
    model = MultiHead(np.eye(3), beta=0.0, kind="softmax")
    x = sample_uniform(n, 3, rng)
    np.testing.assert_allclose(mean_entropy(x, model), np.log(n))  # β = 0: uniform attention
    hot = MultiHead(np.eye(3), beta=50.0, kind="softmax")
    y = x.copy()
    y[1:4] = normalize(y[0] + 1e-3 * rng.standard_normal((3, 3)))
    assert leaders(y, hot, k=4).shape == (1, 4)
    assert set(leaders(y, hot, k=4)[0]) == {0, 1, 2, 3}
