r"""Coincident tokens of the systems of an :class:`~particles.Ensemble`, joined for good.

Tokens at the same point have the same velocity forever (the flow is a function of the
positions), so a group of m coincident tokens is one token of mass m: its pull on the others is
m times one token's, and its own velocity is that of any member. Clustered systems (USA at large
β, where a cluster of m tokens contracts at rate :math:`e^\beta m/n`) reach groups of tokens
within round-off-sized distances of each other long before the end of a run; from then on an
explicit step pays for the stiffness of a contraction that has no effect left, and every
evaluation for the n² pairs of what are a handful of points.

:class:`Groups` joins, at accepted steps, the tokens of a system closer than a chordal distance
δ (with the groups they already belong to: a group never splits) and evaluates the velocity of
the group representatives only, each weighted by its group's size, every member taking its
representative's velocity. A group of diameter D moves as the point its representative is, so
the flow is the one of the collapsed group up to :math:`O(D)` in positions: with δ ≈ 1e-6 below
the step's own error. Used by :meth:`particles.Ensemble.settling` (``merge=δ``).
"""

from __future__ import annotations

import numpy as np

from .ensemble_kernels import WORK

__all__ = ["Groups"]

_EPS = float(np.finfo(float).eps)


def _tolerance(delta: float, d: int, m: float) -> float:
    r"""The screen's gap: a pair the exact test joins has :math:`|x_i - x_j| \le \sqrt{δ^2 + e} \le δ + \sqrt e`
    with e the round-off of its squared distance (at most 4(d + 2) eps m for squared norms up to m in R^d),
    and its projections differ by at most that plus their own round-off (d eps sqrt(m) each): both bounds
    taken twice, δ with 1 %."""
    return 1.01 * delta + np.sqrt(8.0 * (d + 2) * _EPS * m) + 4.0 * d * _EPS * np.sqrt(m)


def _components(rep: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every token's smallest reachable index, for systems whose tokens belong to the groups ``rep`` (C, n)
    (each group labelled by its smallest index) and edges joining the groups a[e] and b[e] of system s[e]:
    a union-find over the groups, each tree's root its smallest label (a root links to the smaller root)."""
    C, n = rep.shape
    parent = np.tile(np.arange(n), (C, 1))
    while True:
        pa, pb = parent[s, a], parent[s, b]  # roots: the parents are compressed below
        if np.array_equal(pa, pb):
            break
        low = np.minimum(pa, pb)
        np.minimum.at(parent, (s, pa), low)
        np.minimum.at(parent, (s, pb), low)
        while True:  # pointer jumping until every label points at its root
            up = np.take_along_axis(parent, parent, axis=1)
            if np.array_equal(up, parent):
                break
            parent = up
    return np.take_along_axis(parent, rep, axis=1)


class Groups:
    """Sticky groups of the tokens of S systems of n tokens, and their compact representatives.

    Attributes (rows are systems): ``rep`` (S, n), each token's representative (the smallest
    index of its group); ``order`` (S, n), the representatives first, by index (then padding);
    ``mass`` (S, n), the group size of each entry of ``order`` (0 on the padding); ``slot`` (S, n),
    the position in ``order`` of each token's representative; ``size`` (S, n), the group size at
    each representative (0 at the other tokens); ``n_eff`` (S,), groups per system.
    """

    def __init__(self, S: int, n: int, delta: float):
        self.delta, self.n = float(delta), n
        self.rep = np.tile(np.arange(n), (S, 1))
        self.order, self.mass, self.slot = self.rep.copy(), np.ones((S, n)), self.rep.copy()
        self.size = np.ones((S, n))  # group size at each representative, 0 at the other members
        self.n_eff = np.full(S, n)

    def update(self, systems: np.ndarray, x: np.ndarray) -> None:
        """Join the tokens of ``systems`` (their accepted states x, (R, n, d)) closer than δ: every token takes
        the smallest index of its component in the graph of its group and the pairs within δ."""
        if not systems.size:
            return
        maybe = self._candidates(systems, x)
        if maybe.size < systems.size:  # the others have no pair to join: the exact test would change nothing
            systems, x = systems[maybe], x[maybe]
        if not systems.size:
            return
        R, n, d = x.shape
        close, other = self._masks(R)  # in buffers: a fresh (R, n, n) temporary per step costs page faults
        xt = WORK.get("groups_xt", (R, d, n))
        xt[...] = x.transpose(0, 2, 1)
        G2 = np.matmul(x, xt, out=WORK.get("groups_G", (R, n, n)))
        G2 *= 2.0  # exact
        sq = np.einsum("snd,snd->sn", x, x)
        D2 = np.add(sq[:, :, None], sq[:, None, :], out=WORK.get("groups_D2", (R, n, n)))
        D2 -= G2  # |x_i|^2 + |x_j|^2 - 2 <x_i, x_j>
        rep = self.rep[systems]
        np.less(D2, self.delta * self.delta, out=close)
        np.not_equal(rep[:, :, None], rep[:, None, :], out=other)
        s, i, j = np.nonzero(np.logical_and(close, other, out=close))  # close pairs of different groups: few
        if not s.size:
            return
        a, b = rep[s, i], rep[s, j]
        rows, s = np.unique(s, return_inverse=True)  # the systems whose groups join
        self.rep[systems[rows]] = _components(rep[rows], s, a, b)
        self._compact(systems[rows])

    def _candidates(self, systems: np.ndarray, x: np.ndarray) -> np.ndarray:
        r"""The rows of ``systems`` that may hold two tokens of different groups within δ: those where two
        tokens of different groups are neighbours, closer than a tolerance τ, in the order of their
        projections :math:`p_i = \langle x_i, u\rangle` on a fixed unit vector u. Necessary: a pair of
        different groups with :math:`|x_i - x_j| < δ` has :math:`|p_i - p_j| \le |x_i - x_j|`, and between
        them in that order some neighbours change group, at a gap no larger. τ adds to δ the round-off of
        the exact test's :math:`|x_i|^2 + |x_j|^2 - 2\langle x_i, x_j\rangle` and of the projections,
        so every pair that test joins passes (the groups, hence the flow, are the exact test's alone);
        O(n log n) per system where the test forms n² distances."""
        d = x.shape[2]
        p = np.matmul(x, self._direction(d))
        order = np.argsort(p, axis=1)
        tol = _tolerance(self.delta, d, float(np.max(np.einsum("snd,snd->sn", x, x))))  # the largest |x_i|^2
        near = np.diff(np.take_along_axis(p, order, axis=1), axis=1) <= tol
        some = np.nonzero(near.any(axis=1))[0]  # any two tokens that near (of any groups): fewer systems
        if not some.size:
            return some
        group = np.take_along_axis(self.rep[systems[some]], order[some], axis=1)
        return some[(near[some] & (group[:, 1:] != group[:, :-1])).any(axis=1)]

    def _direction(self, d: int) -> np.ndarray:
        """A fixed unit vector of R^d, seeded (no special direction that tokens on axes would share)."""
        u = getattr(self, "_u", None)
        if u is None or u.size != d:
            u = np.random.default_rng(0x5EED).standard_normal(d)
            self._u = u = u / np.linalg.norm(u)
        return u

    def _masks(self, R: int):
        """Two boolean (R, n, n) buffers of this object (the largest R asked for so far)."""
        if getattr(self, "_bool", None) is None or self._bool.shape[1] < R:
            self._bool = np.empty((2, R, self.n, self.n), dtype=bool)
        return self._bool[0, :R], self._bool[1, :R]

    def _compact(self, rows: np.ndarray) -> None:
        rep = self.rep[rows]
        R, n = rep.shape
        is_rep = rep == np.arange(n)
        order = np.argsort(~is_rep, axis=1, kind="stable")  # representatives first, by index
        position = np.argsort(order, axis=1)  # the inverse permutation
        n_eff = is_rep.sum(axis=1)
        sizes = np.zeros((R, n))
        np.add.at(sizes, (np.repeat(np.arange(R), n), rep.ravel()), 1.0)
        pad = np.arange(n) >= n_eff[:, None]
        mass = np.where(pad, 0.0, np.take_along_axis(sizes, order, axis=1))
        self.order[rows] = np.where(pad, order[:, :1], order)  # padding: a real token, weight 0
        self.mass[rows], self.n_eff[rows], self.size[rows] = mass, n_eff, sizes
        self.slot[rows] = np.take_along_axis(position, rep, axis=1)

    def velocity(self, ensemble, systems: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Velocities (R, n, d) of the tokens of ``systems`` (``ensemble`` holds exactly those):
        the representatives' velocities under the weighted field, each token taking its own's.
        Few groups per system: the representatives alone, gathered into k <= n/2 slots; else the
        whole state, the members weighted 0."""
        R, n, d = x.shape
        if self.n_eff[systems].min() == n:  # no groups yet: the plain pass
            return ensemble._velocity(x)
        k = int(self.n_eff[systems].max())
        rows = (np.arange(R) * n)[:, None]
        if 2 * k > n:
            v = ensemble._velocity(x, weights=self.size[systems], n=n)
            return np.take(v.reshape(R * n, d), (rows + self.rep[systems]).ravel(), axis=0).reshape(R, n, d)
        xr = np.take(x.reshape(R * n, d), (rows + self.order[systems, :k]).ravel(), axis=0).reshape(R, k, d)
        vr = ensemble._velocity(xr, weights=self.mass[systems, :k], n=n)
        return np.take(vr.reshape(R * k, d), ((np.arange(R) * k)[:, None] + self.slot[systems]).ravel(),
                       axis=0).reshape(R, n, d)
