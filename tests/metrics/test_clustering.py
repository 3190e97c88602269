"""Clustering metrics: known cluster counts, sizes, invariances."""

import numpy as np
import pytest

from metrics import cluster_labels, cluster_sizes, leaders, mean_entropy, n_clusters, n_clusters_batch, silhouette
from particles import InvalidParameterError, MultiHead, normalize, sample_uniform


def caps(rng, k, per, d=3, spread=1e-4):
    centres = sample_uniform(k, d=d, rng=rng)
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
    x = sample_uniform(n, d=3, rng=rng)
    np.testing.assert_allclose(mean_entropy(x, model), np.log(n))  # β = 0: uniform attention
    hot = MultiHead(np.eye(3), beta=50.0, kind="softmax")
    y = x.copy()
    y[1:4] = normalize(y[0] + 1e-3 * rng.standard_normal((3, 3)))
    assert leaders(y, hot, k=4).shape == (1, 4)
    assert set(leaders(y, hot, k=4)[0]) == {0, 1, 2, 3}


def test_components_match_dbscan(rng):
    """The bounded-memory components equal scikit-learn's DBSCAN(min_samples=1) partition."""
    from sklearn.cluster import DBSCAN

    from metrics._observables.clustering import _by_first_appearance

    for _ in range(40):
        d = int(rng.integers(2, 6))
        x, _ = caps(rng, int(rng.integers(1, 6)), int(rng.integers(1, 20)), d=d, spread=10 ** rng.uniform(-5, -1.5))
        x = np.concatenate([x, sample_uniform(int(rng.integers(1, 15)), d=d, rng=rng)])
        eps = 10 ** rng.uniform(-3, -0.5)
        ref = _by_first_appearance(DBSCAN(eps=2 * np.sin(eps / 2), min_samples=1).fit(x).labels_)
        np.testing.assert_array_equal(cluster_labels(x, eps=eps), ref)


def test_blocked_silhouette_and_leaders_match_dense(rng, monkeypatch):
    import importlib

    from sklearn.metrics import silhouette_score

    from particles import geodesic_distance

    clustering = importlib.import_module("metrics._observables.clustering")

    x = normalize(np.repeat(sample_uniform(4, d=3, rng=rng), 15, 0) + 0.05 * rng.standard_normal((60, 3)))
    labels = rng.integers(0, 4, 60)
    labels[0] = 9  # a one-point cluster: s_0 = 0
    D = geodesic_distance(x[:, None, :], x[None, :, :])
    np.fill_diagonal(D, 0.0)
    monkeypatch.setattr(clustering, "SILHOUETTE_BLOCK_ELEMENTS", 7 * 60)  # several row blocks
    assert silhouette(x, labels) == pytest.approx(silhouette_score(D, labels, metric="precomputed"), rel=1e-8)
    model = MultiHead(np.eye(3), beta=3.0, kind="softmax", block_elements=5 * 60)  # several row blocks
    s = 3.0 * model.scores(x)[0]
    p = np.exp(s - s.max(1, keepdims=True))
    received = (p / p.sum(1, keepdims=True)).sum(0)
    np.testing.assert_array_equal(leaders(x, model, k=6)[0], np.argsort(-received, kind="stable")[:6])
    with pytest.raises(InvalidParameterError,
                       match=r"'k' parameter of leaders: must be at most the number of tokens; got k = 61"):
        leaders(x, model, k=61)
    with pytest.raises(InvalidParameterError,
                       match=r"'labels' parameter of silhouette: must have one entry per row of x"):
        silhouette(x, labels[:-1])


def test_n_clusters_batch_refuses_off_sphere():
    with pytest.raises(InvalidParameterError, match="must lie on the unit sphere"):
        n_clusters_batch(np.zeros((2, 3, 2)))
    with pytest.raises(InvalidParameterError, match="must be finite"):
        n_clusters_batch(np.full((2, 3, 2), np.nan))


@pytest.mark.parametrize("d", [3, 8, 40])
def test_n_clusters_batch_links_all_systems_at_once_like_n_clusters(rng, d):
    # d > 2, n <= 128: the Gram-matrix linking of every system at once gives each system's
    # n_clusters (grid search), for clusters of spread around eps and singletons
    eps = 0.05
    centres = rng.standard_normal((6, 4, d))
    centres /= np.linalg.norm(centres, axis=-1, keepdims=True)
    spread = rng.uniform(0.0, 0.06, (6, 1, 1)) / np.sqrt(d)  # angular spread ~ 0..0.06 rad
    x = centres[:, rng.integers(0, 4, 20)] + rng.standard_normal((6, 20, d)) * spread
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    counts = n_clusters_batch(x, eps=eps)
    assert counts.tolist() == [n_clusters(xs, eps=eps) for xs in x]
    assert len(set(counts.tolist())) > 1
