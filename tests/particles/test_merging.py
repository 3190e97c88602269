"""Merged coincident tokens (Ensemble.settling(merge=δ)): the groups, the weighted pass, the flow."""

import numpy as np
import pytest

from particles import Ensemble, SaveAt, simulate
from particles._model.merging import Groups
from particles.validation import InvalidParameterError


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_groups_join_chains_and_never_split():
    e = np.eye(3)
    # tokens 0, 2 and 4 form a chain (0-2 and 2-4 within delta, 0-4 not); 1 and 3 apart
    x = _unit(np.array([e[0], e[1], e[0] + 0.8e-6 * e[1], e[2], e[0] + 1.6e-6 * e[1]]))[None]
    g = Groups(1, 5, 1e-6)
    g.update(np.array([0]), x)
    np.testing.assert_array_equal(g.rep[0], [0, 1, 0, 3, 0])
    assert g.n_eff[0] == 3
    np.testing.assert_array_equal(g.order[0, :3], [0, 1, 3])
    np.testing.assert_array_equal(g.mass[0], [3, 1, 1, 0, 0])
    np.testing.assert_array_equal(g.slot[0], [0, 1, 0, 2, 0])
    np.testing.assert_array_equal(g.size[0], [3, 1, 0, 1, 0])
    g.update(np.array([0]), _unit(np.array([e[0], e[1], e[2], e[2] + e[1], -e[0]]))[None])  # all apart now
    np.testing.assert_array_equal(g.rep[0], [0, 1, 0, 3, 0])  # a group never splits


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("d", [2, 8])
@pytest.mark.parametrize("sizes", [[2] * 6, [6, 6], [2] + [1] * 10])
def test_merged_velocity_is_the_flow_of_coincident_tokens(rng, kind, d, sizes):
    """Systems whose n = 12 tokens coincide in groups of the given sizes: the merged field
    (representatives weighted by their group sizes, gathered) equals the plain velocity of the coincident
    tokens."""
    S, n = 3, sum(sizes)
    pts = _unit(rng.standard_normal((S, len(sizes), d)))
    x = np.repeat(pts, sizes, axis=1)
    x = np.take_along_axis(x, rng.permuted(np.tile(np.arange(n), (S, 1)), axis=1)[..., None], axis=1)
    heads = np.stack([0.9 * np.eye(d), 0.3 * np.eye(d)])
    ens = Ensemble(heads, np.stack([np.eye(d), 0.5 * np.eye(d)]), beta=[0.5, 3.0, 8.0], kind=kind)
    field = ens.settling(1e-3, merge=1e-6)
    field.after_step(0.0, x)
    assert np.all(field.groups.n_eff == len(sizes))
    v = field(0.0, x)
    ref = ens.velocity(x)
    np.testing.assert_allclose(v, ref, rtol=1e-11, atol=1e-12 * np.abs(ref).max())


def test_merged_usa_flow_keeps_the_statistics_with_fewer_evaluations(rng):
    """Clustered USA systems at beta = 9 (d = 8, n = 32, T = 1): merging at 1e-6 gives the same
    clustered-pair fraction at every save time as the exact flow, with under half its velocity
    evaluations (the stiff contraction of formed clusters is gone)."""
    from metrics._observables.pairs import pair_fraction as _pair_fraction
    from metrics._observables.pairs import span_systems as _initial

    x0 = _initial(6, 32, 8, "uniform", np.random.default_rng(1))
    save = SaveAt(ts=np.linspace(0.0, 1.0, 21), x=False, fn=lambda t, x: {"pairs": _pair_fraction(x, 0.999)})
    runs = {}
    for merge in (0.0, 1e-6):
        field = Ensemble(np.eye(8), beta=np.full(6, 9.0), kind="usa").settling(0.0447, merge=merge)
        traj = simulate(x0, field, t1=1.0, dt=1e-4, method="dopri5_systems", rtol=1e-6, atol=1e-8, save=save)
        runs[merge] = (np.asarray(traj.saved["pairs"]), field.system_evaluations)
    np.testing.assert_array_equal(runs[1e-6][0], runs[0.0][0])
    assert runs[0.0][0][-1].min() > 0  # clusters did form
    assert runs[1e-6][1] < 0.5 * runs[0.0][1]


def test_merge_rejects_what_it_cannot_do():
    ens = Ensemble(np.eye(3), beta=[1.0], kind="usa")
    with pytest.raises(InvalidParameterError, match="merge"):
        ens.settling(1e-3, merge=1e-9)
    with pytest.raises(InvalidParameterError, match="m_h >= 0"):
        Ensemble(-np.eye(3), W=np.eye(3), beta=[1.0], kind="usa").settling(1e-3, merge=1e-6)
    with pytest.raises(InvalidParameterError, match="scalar heads"):
        Ensemble(np.diag([1.0, 2.0, 3.0]), W=np.eye(3), beta=[1.0]).settling(1e-3, merge=1e-6)
    from metrics import phase_diagram

    with pytest.raises(InvalidParameterError, match="drop_settled"):
        phase_diagram([1.0], n=4, d=3, n_systems=2, drop_settled=False, merge=1e-6)


@pytest.mark.parametrize(("sizes", "lone"), [([4, 4, 4], False), ([2] + [1] * 10, False), ([2] + [1] * 10, True)])
def test_near_coincident_members_move_with_their_representative(rng, sizes, lone):
    """Tokens within delta of each other (not equal): every member takes its representative's
    velocity exactly (the group moves rigidly), on the gathered path and, with a second system of
    tokens all apart (no group: k = n), on the full-state path."""
    S, n, d = 2, sum(sizes), 5
    pts = _unit(rng.standard_normal((S, len(sizes), d)))
    x = _unit(np.repeat(pts, sizes, axis=1) + 1e-8 * rng.standard_normal((S, n, d)))
    if lone:
        x[1] = _unit(rng.standard_normal((n, d)))
    field = Ensemble(np.eye(d), beta=[2.0, 6.0], kind="usa").settling(1e-3, merge=1e-6)
    field.after_step(0.0, x)
    assert field.groups.n_eff.max() == n if lone else field.groups.n_eff.max() < n  # the path of the case
    v = field(0.0, x)
    rep = field.groups.rep
    np.testing.assert_array_equal(v, np.take_along_axis(v, rep[..., None], axis=1))
    assert np.any(rep != np.arange(n))
    plain = Ensemble(np.eye(d), beta=[2.0, 6.0], kind="usa").velocity(x)
    assert not np.array_equal(v, plain)
    np.testing.assert_allclose(v, plain, atol=1e-5 * np.abs(plain).max())


@pytest.mark.parametrize("d", [2, 3, 16])
def test_the_projection_screen_keeps_every_pair_the_exact_test_joins(rng, monkeypatch, d):
    """Groups.update looks at the distances of a system only where two tokens of different groups are
    neighbours within δ (and round-off) along a fixed direction: pairs at distances a hair below and
    above δ, in every direction, chained and grouped, give the groups of the exact test on every system."""
    S, n, delta = 40, 12, 1e-6
    base = _unit(rng.standard_normal((S, n, d)))
    # every third token a near copy of the one before, at distance δ(1 + r), r in +-1e-6, +-1e-3, +-0.5
    r = rng.choice([-0.5, -1e-3, -1e-6, 1e-6, 1e-3, 0.5], size=(S, n))
    offset = rng.standard_normal((S, n, d))
    offset -= np.sum(offset * base, axis=-1, keepdims=True) * base
    offset *= (delta * (1 + r) / np.linalg.norm(offset, axis=-1))[..., None]
    x = base.copy()
    x[:, 1::3] = _unit(base[:, 0::3][:, : x[:, 1::3].shape[1]] + offset[:, 1::3])
    x[:, 2::3] = _unit(x[:, 1::3][:, : x[:, 2::3].shape[1]] + offset[:, 2::3])  # chains of three
    screened, exact = Groups(S, n, delta), Groups(S, n, delta)
    systems = np.arange(S)
    screened.update(systems, x)
    every = np.nonzero(np.ones((S, n, n), dtype=bool))  # the exact test on every pair of different groups

    def every_pair(systems, x):
        s, i, j = every
        other = exact.rep[systems][s, i] != exact.rep[systems][s, j]
        return s[other], i[other], j[other]

    monkeypatch.setattr(exact, "_pairs", every_pair)
    exact.update(systems, x)
    assert np.any(exact.n_eff < n) and np.any(exact.rep != np.arange(n))
    for name in ("rep", "order", "mass", "slot", "size", "n_eff"):
        np.testing.assert_array_equal(getattr(screened, name), getattr(exact, name))
    # a second step from the joined groups: the pairs already joined never make a system a candidate
    moved = _unit(x + 1e-3 * rng.standard_normal(x.shape))
    screened.update(systems, moved)
    exact.update(systems, moved)
    np.testing.assert_array_equal(screened.rep, exact.rep)


@pytest.mark.parametrize("seed", range(6))
def test_groups_are_the_components_of_the_pairs_within_delta(seed):
    """Over several steps of random clustered states (clumps of near copies at distances around δ, chains
    included), the groups are the connected components, by scipy's csgraph, of the graph of every pair ever
    within δ (distances by np.linalg.norm), each token labelled by its component's smallest index."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(seed)
    S, n, d, delta = 30, 16, 5, 1e-6
    groups, edges = Groups(S, n, delta), np.zeros((S, n, n), dtype=bool)
    centres = _unit(rng.standard_normal((S, 4, d)))
    for _ in range(4):
        x = _unit(centres[:, rng.integers(0, 4, n)] + delta * rng.uniform(0.0, 2.0) * rng.standard_normal((S, n, d)))
        edges |= np.linalg.norm(x[:, :, None] - x[:, None, :], axis=-1) < delta  # (an independent formula)
        groups.update(np.arange(S), x)
        for k in range(S):
            _, comp = connected_components(csr_matrix(edges[k]), directed=False)
            smallest = np.array([np.flatnonzero(comp == c).min() for c in comp])
            np.testing.assert_array_equal(groups.rep[k], smallest)
            assert groups.n_eff[k] == comp.max() + 1
    assert np.any(groups.n_eff < n) and np.any(groups.n_eff > 1)


@pytest.mark.parametrize("seed", range(4))
def test_projection_windows_hold_every_later_position_within_tol(seed):
    """_window_ends over rows laid end to end: each position's window is its row's later positions within tol, to
    the round-off of the shifted keys (ties, gaps of exactly tol and rows of very different spans included)."""
    from particles._model.merging import _window_ends

    rng = np.random.default_rng(seed)
    m, n, tol = 7, 12, 1e-6
    steps = rng.choice([0.0, 0.3 * tol, tol, 1.7 * tol, 1.0], size=(m, n))
    ps = np.cumsum(steps, axis=1) + rng.uniform(-1.0, 1.0, (m, 1))
    end = _window_ends(ps, tol).reshape(m, n) - np.arange(m)[:, None] * n
    for r in range(m):
        for q in range(n):
            inside = np.flatnonzero(ps[r] - ps[r, q] <= tol)
            assert inside.max() < end[r, q] <= n  # every position within tol is in the window, none of another row
            assert np.all(ps[r, q:end[r, q]] - ps[r, q] <= tol * (1 + 1e-6))  # and nothing further
