r"""Cluster structure of point clouds on the sphere, in O(n d) memory.

Clusters are the connected components of the graph joining points at geodesic distance
:math:`\le \varepsilon` (single linkage at ε; DBSCAN with ``min_samples=1``). On the unit
sphere the geodesic threshold ε is the chord threshold :math:`c = 2\sin(\varepsilon/2)`.

The components are found without listing neighbourhoods (a collapsed cluster of n points
has n² neighbour pairs, which is what made DBSCAN grow as n²): points are binned into
cubes of side :math:`c/(2\sqrt d)`, whose diameter :math:`c/2` makes every cube one
connected set; cubes whose representatives are within :math:`2c` are candidate edges
(a KD-tree on the representatives), and a candidate edge is kept if its representatives
are within c or, failing that, if the nearest pair across the two cubes is (a KD-tree on
the larger cube). This is the exact grid algorithm of Gan & Tao (SIGMOD 2015) with a tree
in place of the 3^d neighbour-cube enumeration. Memory is O(n d) plus the candidate edges.
"""

from __future__ import annotations

import numpy as np

from particles.extend import WORKING_MEMORY_ELEMENTS, rows_per_block
from particles.validation import (
    NONE,
    AnyOf,
    Array,
    Interval,
    InvalidParameterError,
    Points,
    States,
    Weights,
    declare,
    one_per,
    weights_or_uniform,
)

__all__ = ["cluster_labels", "n_clusters", "n_clusters_batch", "cluster_sizes", "silhouette", "bounded_clusters",
           "cluster_row"]

#: entries of one (block x n) distance tile of :func:`silhouette`: the library's working-memory budget
SILHOUETTE_BLOCK_ELEMENTS = WORKING_MEMORY_ELEMENTS


def _chord(eps: float) -> float:
    return 2.0 * np.sin(eps / 2.0)


def _components(x: np.ndarray, chord: float) -> np.ndarray:
    """Labels 0..k-1 (arbitrary order) of the chord-``chord`` connected components of rows x."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    n, d = x.shape
    if d == 2:
        return _circle_components(x, chord)
    side = chord / (2.0 * np.sqrt(d))
    if side > 1e-12:
        keys = np.floor(x / side).astype(np.int64)
        reach = 2.0 * chord  # rep-to-rep bound: c/2 + c + c/2
    else:  # ε below round-off: only exact duplicates share a cube
        keys = x
        reach = chord
    _, group, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    group = group.ravel()
    n_groups = counts.size
    if n_groups == 1:
        return np.zeros(n, dtype=np.int64)
    first = np.empty(n_groups, dtype=np.int64)
    first[group[::-1]] = np.arange(n - 1, -1, -1)
    reps = x[first]
    pairs = cKDTree(reps).query_pairs(reach, output_type="ndarray")
    if pairs.size == 0:
        return group.astype(np.int64)
    gap = np.sqrt(np.einsum("ij,ij->i", reps[pairs[:, 0]] - reps[pairs[:, 1]], reps[pairs[:, 0]] - reps[pairs[:, 1]]))
    direct = gap <= chord
    edges = [pairs[direct]]
    # pairs whose representatives are farther than c: decide from the nearest cross pair
    maybe = pairs[~direct & ((counts[pairs[:, 0]] > 1) | (counts[pairs[:, 1]] > 1))]
    if maybe.size:
        graph = coo_matrix((np.ones(len(edges[0])), (edges[0][:, 0], edges[0][:, 1])), shape=(n_groups, n_groups))
        _, comp = connected_components(graph, directed=False)
        # most candidate pairs already share a component through direct edges: drop them at once
        maybe = maybe[comp[maybe[:, 0]] != comp[maybe[:, 1]]]
        parent = {}

        def find(a):
            while parent.get(a, a) != a:
                a = parent[a]
            return a

        order = np.argsort(group, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])
        members = lambda g: x[order[starts[g]: starts[g + 1]]]  # noqa: E731
        kept = []
        for ga, gb in maybe:
            ra, rb = find(comp[ga]), find(comp[gb])
            if ra == rb:
                continue
            A, B = members(ga), members(gb)
            if len(A) > len(B):
                A, B = B, A
            dist, _ = cKDTree(B).query(A, k=1)
            if float(dist.min()) <= chord:
                parent[ra] = rb
                kept.append((ga, gb))
        if kept:
            edges.append(np.asarray(kept, dtype=pairs.dtype))
    e = np.concatenate(edges)
    graph = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n_groups, n_groups))
    _, comp = connected_components(graph, directed=False)
    return comp[group].astype(np.int64)


def _circle_components(x: np.ndarray, chord: float) -> np.ndarray:
    """On S^1 two points within ε are joined through every point between them, so the
    components are the runs of the sorted angles whose consecutive gaps link: O(n log n)."""
    theta = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    order = np.argsort(theta, kind="stable")
    gaps = np.diff(theta[order], append=theta[order[0]] + 2 * np.pi)  # gap after each sorted point
    link = 2.0 * np.sin(np.minimum(gaps, np.pi) / 2.0) <= chord
    labels = np.empty(len(x), dtype=np.int64)
    if link.all():
        labels[:] = 0
        return labels
    run = np.concatenate([[0], np.cumsum(~link[:-1])])
    if link[-1]:  # the last run wraps around to the first
        run[run == run[-1]] = 0
    labels[order] = run
    return labels


def _by_first_appearance(labels: np.ndarray) -> np.ndarray:
    """Relabel 0..k-1 in order of first appearance (deterministic labels)."""
    values, first = np.unique(labels, return_index=True)
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(values.size)
    return rank[np.searchsorted(values, labels)]


#: the geodesic linking distance of every clustering function (one rule)
EPS = Interval(0, np.pi, closed="right", hint="eps is a geodesic distance in radians, e.g. 1e-2.")
_X = Points(atol=1e-8)
_WEIGHTS = AnyOf(NONE, Weights(probability=True))


@declare(x=_X, eps=EPS)
def cluster_labels(x, *, eps: float = 1e-2) -> np.ndarray:
    r"""Labels 0..k−1 of the ε-connected components (geodesic ε) of ``x``, by first appearance.

    Parameters
    ----------
    x : ndarray of shape (n, d), unit rows
    eps : float in (0, π]
        Geodesic linking distance.

    Returns
    -------
    ndarray of shape (n,), int64

    Notes
    -----
    O(n d) memory (module docstring), so a collapsed state of 10⁶ tokens costs as much as a
    spread one.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [1.0, 1e-4], [0.0, 1.0]])
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> cluster_labels(x).tolist()
    [0, 0, 1]
    """
    return _by_first_appearance(_components(x, _chord(eps)))


@declare(x=_X, weights=_WEIGHTS, eps=EPS, relations=[one_per("weights", "x")])
def n_clusters(x, weights=None, *, eps: float = 1e-2) -> int:
    r"""Number of ε-connected components :math:`k` (weights are validated but do not change
    the count: components are a property of the support)."""
    return int(np.unique(_components(x, _chord(eps))).size)


@declare(x=_X, weights=_WEIGHTS, eps=EPS, relations=[one_per("weights", "x")])
def cluster_sizes(x, weights=None, *, eps: float = 1e-2) -> np.ndarray:
    r"""Mass of each cluster, :math:`\sum_{i\in C_k} w_i`, sorted decreasingly (sums to 1); O(n d) memory."""
    w = weights_or_uniform(weights, len(x))
    labels = _components(x, _chord(eps))
    return np.sort(np.bincount(labels, weights=w))[::-1]


def _component_masses(x: np.ndarray, eps: float) -> np.ndarray:
    """:func:`cluster_sizes` of uniform weights for points already validated (inner loops of
    studies): the same ε-linking, O(n d) memory."""
    return np.sort(np.bincount(_components(x, _chord(eps))) / len(x))[::-1]


@declare(x=_X, labels=AnyOf(NONE, Array(1, what="one label per point, shape (n,)")), eps=EPS,
         relations=[one_per("labels", "x")])
def silhouette(x, labels=None, *, eps: float = 1e-2) -> float:
    r"""Mean silhouette coefficient with the geodesic metric.

    :math:`s_i = (b_i - a_i)/\max(a_i, b_i)`, :math:`a_i` the mean geodesic distance to the
    other members of i's cluster, :math:`b_i` the smallest mean distance to another cluster;
    :math:`s_i = 0` in a cluster of one point (scikit-learn's convention). Needs
    2 ≤ k ≤ n − 1 clusters.

    Computed in row blocks (the distances of a block of rows to all points, summed per
    cluster through a sparse one-hot matrix): O(n·block + n k) memory, O(n² d) time.
    Distances come from the Gram matrix, :math:`2\arctan2(\sqrt{2-2c}, \sqrt{2+2c})`, which
    rounds distances below ~1e-8 to 0 (harmless here: they only enter a_i).
    """
    from scipy.sparse import csr_matrix

    n = len(x)
    if labels is None:
        labels = cluster_labels(x, eps=eps)
    values, codes = np.unique(labels, return_inverse=True)
    k = values.size
    if not 2 <= k <= n - 1:
        raise InvalidParameterError(
            f"silhouette needs between 2 and n - 1 = {n - 1} clusters (inclusive); got {k}. "
            "Change eps or pass labels."
        )
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    onehot = csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, k))
    B = rows_per_block(n, n, SILHOUETTE_BLOCK_ELEMENTS)
    total = 0.0
    for start in range(0, n, B):
        stop = min(n, start + B)
        c = np.clip(x[start:stop] @ x.T, -1.0, 1.0)
        D = 2.0 * np.arctan2(np.sqrt(2.0 - 2.0 * c), np.sqrt(2.0 + 2.0 * c))
        S = np.asarray(onehot.T.dot(D.T).T)  # (block, k) sums of distances per cluster
        own = codes[start:stop]
        rows = np.arange(stop - start)
        size = counts[own]
        with np.errstate(invalid="ignore", divide="ignore"):
            # a one-point cluster has no a_i: its s_i is set to 0 below, on purpose
            a = S[rows, own] / (size - 1)
        mean_other = S / counts[None, :]
        mean_other[rows, own] = np.inf
        b = mean_other.min(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (b - a) / np.maximum(a, b)
        total += float(np.sum(np.where(size > 1, np.nan_to_num(s), 0.0)))
    return total / n


@declare(x=States(hint="Pass a stack of systems of shape (S, n, d), unit rows."), eps=EPS)
def n_clusters_batch(x, *, eps: float = 1e-2) -> np.ndarray:
    r"""Cluster counts of a stack of systems ``x`` of shape (S, n, d), shape (S,).

    On S^1 (d = 2) this is vectorised: sort the angles, and the ε-connected components
    are the arcs between consecutive gaps wider than ε (a full circle without such a gap
    is one cluster). For d > 2 and n <= 128 the pairs of all systems are linked at once
    (:math:`\|x_i-x_j\|^2 = \|x_i\|^2+\|x_j\|^2-2\langle x_i,x_j\rangle \le c^2`, the chord
    :math:`c = 2\sin(\varepsilon/2)` of :func:`n_clusters`) and the components of that one graph
    counted per system; for larger n it loops over :func:`n_clusters`.
    """
    if x.shape[2] != 2:
        if x.shape[1] <= _DENSE_MAX_N:
            return _dense_counts(x, _chord(eps))
        return np.array([np.unique(_components(xs, _chord(eps))).size for xs in x])
    theta = np.sort(np.arctan2(x[..., 1], x[..., 0]), axis=1)
    gaps = np.diff(theta, axis=1, append=theta[:, :1] + 2 * np.pi)
    wide = (gaps > eps).sum(axis=1)
    return np.maximum(wide, 1)


#: up to this many points per system, :func:`n_clusters_batch` (d > 2) links the pairs of every
#: system at once from their Gram matrices instead of one grid search per system
_DENSE_MAX_N = 128


def _dense_counts(x: np.ndarray, chord: float) -> np.ndarray:
    """Components per system of the graph joining pairs at chord distance <= ``chord``, from Gram
    tiles of about WORKING_MEMORY_ELEMENTS entries (:func:`component_counts` per tile)."""
    S, n, _ = x.shape
    sq = np.einsum("snd,snd->sn", x, x)
    step = max(1, WORKING_MEMORY_ELEMENTS // (n * n))
    counts = []
    for s0 in range(0, S, step):
        xs, q = x[s0:s0 + step], sq[s0:s0 + step]
        counts.append(component_counts(q[:, :, None] + q[:, None, :] - 2.0 * (xs @ xs.transpose(0, 2, 1))
                                        <= chord * chord))
    return np.concatenate(counts)


def component_counts(linked: np.ndarray) -> np.ndarray:
    """Connected components per system of the graphs ``linked`` (S, n, n) (bool; the diagonal
    does not count, the links are undirected): 1 where every pair is linked, n where none is,
    else the components of one sparse graph holding those systems (components never join two
    systems)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    S, n, _ = linked.shape
    degree = np.count_nonzero(linked, axis=2) - np.diagonal(linked, axis1=1, axis2=2)  # off the diagonal
    counts = np.where(np.all(degree == n - 1, axis=1), 1, 0)
    counts[np.all(degree == 0, axis=1)] = n
    rest = np.nonzero(counts == 0)[0]
    if rest.size:
        s, i, j = np.nonzero(linked[rest])
        graph = csr_matrix((np.ones(s.size), (s * n + i, s * n + j)), shape=(rest.size * n, rest.size * n))
        labels = np.sort(connected_components(graph, directed=False)[1].reshape(rest.size, n), axis=1)
        counts[rest] = 1 + np.count_nonzero(np.diff(labels, axis=1), axis=1)
    return counts


def bounded_clusters(x: np.ndarray, *, eps: float) -> np.ndarray:
    r"""Cluster masses (sorted decreasingly, summing to 1) of the ε-connected components of ``x``
    (geodesic ε): the one definition of :func:`metrics.cluster_sizes`, in O(n d) memory."""
    return _component_masses(np.asarray(x, dtype=np.float64), eps)


def cluster_row(x: np.ndarray, *, eps: float, max_clusters: int) -> dict:
    """The cluster columns of one save of a study cell: ``n_clusters`` (the number of ε-components of
    ``x``) and ``cluster_mass_0 .. cluster_mass_{K-1}``, the K largest masses (zero-padded)."""
    masses = bounded_clusters(x, eps=eps)
    top = np.zeros(max_clusters)
    top[:min(max_clusters, len(masses))] = masses[:max_clusters]
    row = {"n_clusters": float(len(masses))}
    row.update({f"cluster_mass_{j}": top[j] for j in range(max_clusters)})
    return row
