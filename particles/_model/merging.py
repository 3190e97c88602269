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

from .._core.numerics import rowdot

__all__ = ["Groups", "Quotient"]

_EPS = float(np.finfo(float).eps)


def _tolerance(delta: float, d: int, m: float) -> float:
    r"""The screen's gap: a pair the exact test joins has :math:`|x_i - x_j| \le \sqrt{δ^2 + e} \le δ + \sqrt e`
    with e the round-off of its squared distance (below 4(d + 2) eps m for squared norms up to m in R^d, in the
    Gram form; the difference form is far more accurate), and its projections differ by at most that plus their
    own round-off (d eps sqrt(m) each): both bounds taken twice, δ with 1 %."""
    return 1.01 * delta + np.sqrt(8.0 * (d + 2) * _EPS * m) + 4.0 * d * _EPS * np.sqrt(m)


def _window_ends(ps: np.ndarray, tol: float) -> np.ndarray:
    """For each flat position q of the rows ``ps`` (m, n) (each ascending), the flat position after the last one
    of its row within tol of it: one searchsorted over the rows laid end to end, each shifted to start past the
    previous one's end by more than tol (tol widened by the round-off of the shifted keys)."""
    m, n = ps.shape
    width = float((ps[:, -1] - ps[:, 0]).max()) + 4.0 * tol + 1.0
    keys = ((ps - ps[:, :1]) + width * np.arange(m)[:, None]).ravel()
    return np.searchsorted(keys, keys + (tol + 8.0 * _EPS * width * m), side="right")


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
        the smallest index of its component in the graph of its group and the pairs within δ
        (the exact test: :math:`|x_i - x_j|^2 < δ^2`, from the difference, which keeps its relative accuracy down
        to distances where the Gram form loses its digits)."""
        if not systems.size:
            return
        s, i, j = self._pairs(systems, x)
        n, d = x.shape[1:]
        flat = x.reshape(-1, d)
        diff = flat[s * n + i] - flat[s * n + j]
        close = rowdot(diff, diff) < self.delta * self.delta
        if not close.any():
            return
        s, i, j = s[close], i[close], j[close]
        rep = self.rep[systems]
        a, b = rep[s, i], rep[s, j]
        rows, s = np.unique(s, return_inverse=True)  # the systems whose groups join
        self.rep[systems[rows]] = _components(rep[rows], s, a, b)
        self._compact(systems[rows])

    def _pairs(self, systems: np.ndarray, x: np.ndarray):
        r"""The pairs (s, i, j) (s a row of ``systems``, i and j tokens of different groups) the exact test must
        look at: those whose projections :math:`p_i = \langle x_i, u\rangle` on a fixed unit vector u lie within a
        tolerance τ, in a run of that order (consecutive gaps at most τ) that holds two groups. Complete: a pair
        with :math:`|x_i - x_j| < δ` has :math:`|p_i - p_j| \le |x_i - x_j|`; τ adds to δ the round-off of the
        exact test and of the projections. So the groups, hence the flow, are the exact test's on every pair, at
        O(n log n) per system and the pairs within τ, where the test of all pairs forms n² distances."""
        R, n, d = x.shape
        p = np.matmul(x, self._direction(d))
        order = np.argsort(p, axis=1)
        base = (np.arange(R) * n)[:, None]
        tol = _tolerance(self.delta, d, float(np.max(rowdot(x, x))))  # the largest |x_i|^2
        ps = np.take(p, base + order)  # each row's projections, ascending
        near = np.diff(ps, axis=1) <= tol
        some = np.nonzero(near.any(axis=1))[0]  # systems with a run: few, or (late) those with groups
        if not some.size:
            return some, some, some
        near, srt, ps = near[some], order[some], ps[some]
        group = np.take_along_axis(self.rep[systems[some]], srt, axis=1).ravel()  # groups in projection order
        m = some.size
        brk = np.ones((m, n), dtype=bool)  # a run ends after a gap above tol and at the end of a row
        brk[:, :-1] = ~near
        brk = brk.ravel()
        run = np.cumsum(brk) - brk  # each flat position's run
        mixed = np.zeros(int(brk.sum()), dtype=bool)  # runs of two groups or more (one of them different neighbours)
        mixed[run[:-1][~brk[:-1] & (group[1:] != group[:-1])]] = True
        if not mixed.any():
            return some[:0], some[:0], some[:0]
        # every position q of such a run pairs with the later positions within tol of it, [q + 1, its window's end)
        q = np.arange(m * n)
        count = np.where(mixed[run], _window_ends(ps, tol) - q - 1, 0)
        first = np.repeat(q, count)
        second = first + 1 + np.arange(first.size) - np.repeat(np.cumsum(count) - count, count)
        other = group[first] != group[second]
        first, second = first[other], second[other]
        srt = srt.ravel()
        i, j, row = srt[first], srt[second], first // n
        return some[row], i, j

    def _direction(self, d: int) -> np.ndarray:
        """A fixed unit vector of R^d, seeded (no special direction that tokens on axes would share)."""
        u = getattr(self, "_u", None)
        if u is None or u.size != d:
            u = np.random.default_rng(0x5EED).standard_normal(d)
            self._u = u = u / np.linalg.norm(u)
        return u

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
        The representatives alone, gathered into k slots (k the largest number of groups of a system; a
        pass costs about k², and the gathers less than the pairs they save, down to k = n - 1); where some
        system has no group yet (k = n), the whole state, the members weighted 0."""
        R, n, d = x.shape
        if self.n_eff[systems].min() == n:  # no groups yet: the plain pass
            return ensemble._velocity(x)
        q = self.quotient(ensemble, systems, x)
        if q is None:  # k = n
            v = ensemble._velocity(x, weights=self.size[systems], n=n)
            rows = (np.arange(R) * n)[:, None]
            return np.take(v.reshape(R * n, d), (rows + self.rep[systems]).ravel(), axis=0).reshape(R, n, d)
        return q.expand(q(None, q.x))

    def quotient(self, ensemble, systems: np.ndarray, x: np.ndarray, tally=None):
        """The :class:`Quotient` of the tokens x (R, n, d) of ``systems`` by their groups, or None where some
        system has no group (k = n: the gathers would save nothing)."""
        if self.n_eff[systems].max() == x.shape[1]:
            return None
        return Quotient(self, ensemble, systems, x, tally)


class Quotient:
    r"""The representatives of the groups of a stack x (R, n, d), gathered into k slots (k the largest number of
    groups of a system; padding: a real token of weight 0), with the field they move in.

    Every member of a group has its representative's velocity, so the field is determined by the (R, k, d)
    state ``x`` of the slots: calling the quotient gives their velocities under the weighted field (each
    representative of the mass of its group), and :meth:`expand` gives every token its representative's. An
    explicit Runge–Kutta step of the whole stack forms each member's stage state from its own position and its
    representative's stage velocities, which depend on the representatives' stage states alone: so the step's
    increment is the expanded increment of the step of ``x``, to the last bit, and the stage arithmetic runs over
    k instead of n tokens (``particles._dynamics.steppers``).

    Attributes
    ----------
    x : ndarray of shape (R, k, d)
        The representatives' states.
    """

    reads_state_only = writes_into = True  # as the Ensemble (the rk4 stepper's buffers)

    def __init__(self, groups: Groups, ensemble, systems: np.ndarray, x: np.ndarray, tally=None):
        R, n, d = x.shape
        k = int(groups.n_eff[systems].max())
        reps = ((np.arange(R) * n)[:, None] + groups.order[systems, :k]).ravel()
        self.x = np.take(x.reshape(R * n, d), reps, axis=0).reshape(R, k, d)
        self._slot = ((np.arange(R) * k)[:, None] + groups.slot[systems]).ravel()
        self._weights, self._ensemble, self._shape, self._tally = groups.mass[systems, :k], ensemble, x.shape, tally

    def __call__(self, t, x: np.ndarray, out=None) -> np.ndarray:
        """The velocities (R, k, d) of the slots at the states x (R, k, d) (into ``out`` if given)."""
        if self._tally is not None:
            self._tally()
        return self._ensemble._velocity(x, weights=self._weights, n=self._shape[1], out=out)

    def expand(self, v: np.ndarray) -> np.ndarray:
        """Every token's entry of its representative's slot of v (R, k, d): a new (R, n, d) array."""
        return np.take(v.reshape(-1, self._shape[2]), self._slot, axis=0).reshape(self._shape)
