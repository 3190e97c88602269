r"""Transport to a reference measure: the scalable distances of the mean-field limit and chaos studies.

Transport (all through POT; the method used is returned so the study can record it):

- **S^1, exact, O(N log N).** The reference :math:`\mu` is a circle-grid measure
  (piecewise-uniform density on m cells). It is replaced by its *quantile atoms*
  :math:`y_j = F^{-1}((j + 1/2)/M)`, :math:`j < M`, with :math:`M = \max(4 n, 4m)`; on the
  circle :math:`W_p(\mu, \hat\mu_M) \le 2\pi/M`, two orders below the :math:`n^{-1/2}` signal.
  :math:`W_p(\mu_n, \hat\mu_M)` is then exact (:func:`circle_wasserstein`): W1 by the closed
  form (weighted median of F_n - F), W2 by ``ot.binary_search_circle``, in units of turns times
  2π = radians. ``method="emd2"`` sends the same atoms through the network simplex with the
  geodesic cost (the two agree to round-off, which the tests check), 100-1000 times slower
  (0.1-0.9 s against 0.3-9 ms for n = 16-1024 against 4096 atoms), so it is a cross-check only.
  ``ot.wasserstein_circle(p=1)`` (the closed form) is not used: in POT 0.9.7 it returns wrong
  values when no atom lies near angle 0.
- **S^{d-1}, d ≥ 3, O(L (n log n + M)).** Sliced :math:`SW_2` of the embedded measures
  (:class:`SlicedReference`): a metric on measures, and a surrogate with the same
  :math:`n^{-1/2}` rate as :math:`W_2` for i.i.d. samples, because each projection
  :math:`\langle\theta, x\rangle` of a density bounded above and below on :math:`S^{d-1}` has a
  density on [-1, 1] comparable to :math:`(1-t^2)^{(d-3)/2}` (uniform on S^2, Archimedes), so
  :math:`J_2 = \int F(1-F)/f < \infty` and its empirical :math:`W_2` is :math:`O(n^{-1/2})`
  (Bobkov & Ledoux 2019). The spherical sliced distance of POT
  (``ot.sliced_wasserstein_sphere``) estimates the same rate but re-sorts the reference and runs a
  binary search per call: more than 15 minutes for one call against a 4·10^5-point reference
  with 200 projections, against seconds here.
"""

from __future__ import annotations

import numpy as np

from particles.extend import WORKING_MEMORY_ELEMENTS, row_blocks
from particles.validation import Integer, InvalidParameterError, Options, States, declare

__all__ = ["circle_quantile_atoms", "circle_wasserstein", "SlicedReference", "EMD_MAX_ELEMENTS"]

#: largest n·M accepted by ``circle_wasserstein(method="emd2")`` (its dense cost matrix)
EMD_MAX_ELEMENTS = 4_000_000
_TWO_PI = 2 * np.pi


@declare(M=Integer(1, hint="The number of quantile atoms, e.g. 4096."))
def circle_quantile_atoms(mass: np.ndarray, M: int) -> np.ndarray:
    r"""Angles in [0, 2π) of the M quantile atoms :math:`F^{-1}((j+1/2)/M)` of the circle-grid
    measure with cell masses ``mass`` on the cells :math:`[2\pi k/m, 2\pi(k+1)/m)` (uniform inside).

    :math:`W_p` between the grid measure and the uniform measure on these atoms is at most
    :math:`2\pi/M` (each atom carries the mass 1/M of an arc of its quantile interval).

    >>> import numpy as np
    >>> circle_quantile_atoms(np.full(4, 0.25), 4) / np.pi   # uniform: the midpoints of 4 arcs
    array([0.25, 0.75, 1.25, 1.75])
    """
    from particles.validation import check_real_array

    mass = check_real_array(mass, "mass", "circle_quantile_atoms", ndim=1)
    if np.any(mass < 0) or not mass.sum() > 0:
        raise InvalidParameterError("mass of circle_quantile_atoms must be non-negative cell masses with a positive "
                                    "sum.")
    m = len(mass)
    cdf = np.concatenate([[0.0], np.cumsum(mass)])
    cdf /= cdf[-1]
    q = (np.arange(M) + 0.5) / M
    k = np.clip(np.searchsorted(cdf, q, side="right") - 1, 0, m - 1)
    frac = (q - cdf[k]) / np.where(mass[k] > 0, cdf[k + 1] - cdf[k], 1.0)
    return (k + np.clip(frac, 0.0, 1.0)) * _TWO_PI / m


def _circle_weights(w, n, name):
    from particles.validation import check_real_array

    if w is None:
        return np.full(n, 1.0 / n)
    w = check_real_array(w, name, "circle_wasserstein", shape=(n,))
    if np.any(w < 0) or not w.sum() > 0:
        raise InvalidParameterError(f"{name} of circle_wasserstein must be {n} non-negative weights with a "
                                    "positive sum (one per angle).")
    return w / w.sum()


@declare(p=Integer(1, hint="The order of W_p on the circle, e.g. 1 or 2."), method=Options("auto", "circle", "emd2"))
def circle_wasserstein(theta, atoms, *, p: int = 1, method: str = "auto", weights=None,
                       atom_weights=None) -> tuple[float, str]:
    r"""Exact :math:`W_p` on :math:`S^1` (geodesic cost, radians) between two discrete measures
    :math:`\sum_i a_i\delta_{\theta_i}` and :math:`\sum_j b_j\delta_{\phi_j}` (uniform weights by default).

    On the circle of length 1, :math:`W_1 = \min_\alpha\int_0^1|F(s) - G(s) - \alpha|\,ds`, the
    optimal α the median of F - G weighted by arc length (Rabin, Delon & Gousseau 2011), in
    O((n + M) log(n + M)). For p > 1, :math:`W_p^p = \inf_\alpha\int_0^1|F^{-1}(u) - (G - \alpha)^{-1}(u)|^p\,du`,
    minimised over α by ``ot.binary_search_circle`` (Delon, Salomon & Sobolevski 2010) to 1e-12.
    A grid measure on :math:`S^1` enters through :func:`circle_quantile_atoms` (error at most
    :math:`2\pi/M`).

    Parameters
    ----------
    theta, atoms : (n,), (M,) angles in radians (any real values; taken mod 2π)
    p : int >= 1
    method : {"auto", "circle", "emd2"}
        ``"circle"`` (= ``"auto"``): the closed form / binary search above. ``"emd2"``: the network
        simplex on the dense geodesic cost, a cross-check 100-1000 times slower
        (n·M ≤ :data:`EMD_MAX_ELEMENTS`).
    weights, atom_weights : (n,), (M,) non-negative, optional
        Masses of the two measures (normalised here).

    Returns
    -------
    (value, method used)

    Examples
    --------
    >>> import numpy as np
    >>> w, how = circle_wasserstein([0.0], [np.pi / 2], p=1)
    >>> round(w / np.pi, 12), how.startswith("circle")
    (0.5, True)
    >>> w2 = circle_wasserstein([0.0, np.pi], [0.0, np.pi], p=2, atom_weights=[0.25, 0.75])[0]
    >>> round(w2 / np.pi, 9)  # a quarter of the mass moves half a turn
    0.5
    """
    import ot

    from particles.validation import check_real_array

    caller = "circle_wasserstein"
    theta = check_real_array(theta, "theta", caller, ndim=1, expected="a 1-d array of angles (radians)")
    atoms = check_real_array(atoms, "atoms", caller, ndim=1, expected="a 1-d array of angles (radians)")
    a = _circle_weights(weights, len(theta), "weights")
    b = _circle_weights(atom_weights, len(atoms), "atom_weights")
    u = np.mod(theta, _TWO_PI) / _TWO_PI
    v = np.mod(atoms, _TWO_PI) / _TWO_PI
    if method == "emd2":
        if len(u) * len(v) > EMD_MAX_ELEMENTS:
            raise InvalidParameterError(
                f"method='emd2' of {caller} needs an n x M = {len(u)} x {len(v)} cost matrix, above "
                f"EMD_MAX_ELEMENTS = {EMD_MAX_ELEMENTS}; use method='circle' (exact, O((n + M) log(n + M))).")
        d = np.abs(u[:, None] - v[None, :])
        cost = (_TWO_PI * np.minimum(d, 1 - d)) ** p
        val = ot.emd2(a, b, cost, numItermax=10_000_000)
        return float(max(val, 0.0) ** (1 / p)), "ot.emd2"
    if p == 1:
        # POT 0.9.7's ot.wasserstein_circle and ot.binary_search_circle return wrong W1 values (up to a
        # full turn) when no atom lies near angle 0; W1 is the closed form below instead
        return float(_TWO_PI * _circle_w1(u, v, a, b)), "circle W1 closed form (Rabin et al. 2011)"
    val = ot.binary_search_circle(u, v, u_weights=a, v_weights=b, p=p, eps=1e-12)
    val = max(float(np.asarray(val).reshape(-1)[0]), 0.0)  # W_p^p in turns^p
    return _TWO_PI * val ** (1 / p), "ot.binary_search_circle"


def _circle_w1(u: np.ndarray, v: np.ndarray, a=None, b=None) -> np.ndarray:
    r""":math:`W_1 = \min_\alpha\int_0^1|F_u(s) - F_v(s) - \alpha|\,ds` on the circle of length 1 for
    each row of ``u`` (shape (..., n), weights ``a``, uniform by default) against ``v`` (shape (M,),
    weights ``b``): G = F_u - F_v is piecewise constant between the merged sorted atoms, and the
    optimal α is the median of G weighted by interval length (Rabin et al. 2011). Vectorised over
    the leading dims of ``u``."""
    u = np.asarray(u, dtype=np.float64)
    lead, n, M = u.shape[:-1], u.shape[-1], len(v)
    a = np.full(n, 1 / n) if a is None else a
    b = np.full(M, 1 / M) if b is None else b
    z = np.concatenate([u, np.broadcast_to(v, lead + (M,))], axis=-1)
    w = np.concatenate([a, -b])
    order = np.argsort(z, axis=-1, kind="stable")
    z = np.take_along_axis(z, order, axis=-1)
    G = np.cumsum(w[order], axis=-1)
    zeros, ones = np.zeros(lead + (1,)), np.ones(lead + (1,))
    G = np.concatenate([zeros, G], axis=-1)  # G on [0, z_0) is 0
    lengths = np.diff(np.concatenate([zeros, z, ones], axis=-1), axis=-1)
    o = np.argsort(G, axis=-1, kind="stable")
    c = np.cumsum(np.take_along_axis(lengths, o, axis=-1), axis=-1)
    k = np.minimum(np.sum(c < 0.5 * c[..., -1:], axis=-1, keepdims=True), c.shape[-1] - 1)
    alpha = np.take_along_axis(np.take_along_axis(G, o, axis=-1), k, axis=-1)
    return np.sum(lengths * np.abs(G - alpha), axis=-1)


@declare(ref_points=States(min_times=1, hint="Pass reference samples of shape (T, N, d), unit rows."),
         n_projections=Integer(1), n_quantiles=Integer(1), seed=Integer(0))
class SlicedReference:
    r"""Sliced :math:`SW_2` to a large reference sample, with the reference projected once.

    :math:`SW_2^2(\mu, \nu) = \int_{S^{d-1}} W_2^2(\theta_\#\mu, \theta_\#\nu)\,d\sigma(\theta)`,
    :math:`\theta_\#\mu` the law of :math:`\langle\theta, x\rangle` (Bonneel et al. 2015), is
    estimated with L directions drawn once (``ot.sliced.get_random_projections``). Each projected
    reference (one per save time) is stored as its M quantile atoms
    :math:`q_j = Y_{(\lceil (j + 1/2) N / M\rceil)}`, so one call costs O(L (n log n + n + M)) and no
    reference sort; :math:`W_2(\theta_\#\nu, \hat q) \le` the atom spacing, about
    :math:`2/M`, far below the :math:`n^{-1/2}` signal. The 1-d :math:`W_2^2` between the sorted
    projections and the atoms is exact (both quantile functions are step functions on the merged
    grid :math:`\{i/n\} \cup \{j/M\}`).

    Parameters
    ----------
    ref_points : array (T, N, d)
        Reference samples at T save times.
    n_projections : int
        Directions L; the Monte-Carlo standard error of the estimate is returned with it.
    n_quantiles : int
        Atoms M per projected reference.
    seed : int
        Seed of the directions (the same for every call, so all rows share them).
    """

    #: levels of the nodes of piecewise-linear quantile functions (:meth:`from_quantile_nodes`); None: atoms
    levels = None

    @property
    def representation(self) -> str:
        """How each projected reference is held, for the provenance (and the study's cell keys)."""
        if self.levels is not None:
            return f"piecewise-linear quantile function on {self.atoms.shape[1]} nodes"
        return f"{self.atoms.shape[1]} quantile atoms"

    def __init__(self, ref_points, *, n_projections: int = 256, n_quantiles: int = 16384, seed: int = 0):
        from ot.sliced import get_random_projections

        T, N, d = ref_points.shape
        self.theta = np.ascontiguousarray(get_random_projections(d, int(n_projections), seed=seed).T)  # (L, d)
        M = min(int(n_quantiles), N)
        rank = np.minimum(((np.arange(M) + 0.5) * N / M).astype(np.int64), N - 1)
        self.atoms = np.empty((T, M, len(self.theta)))
        for k in range(T):
            for c in _chunks(N, len(self.theta)):
                self.atoms[k][:, c] = np.sort(ref_points[k] @ self.theta[c].T, axis=0)[rank]

    @classmethod
    def from_atoms(cls, theta, atoms) -> SlicedReference:
        r"""A reference given directly by its directions ``theta`` (L, d) (unit rows) and the
        sorted quantile atoms ``atoms`` (T, M, L) of each projected reference law, e.g. the exact
        quantiles :math:`F_\theta^{-1}((j + 1/2)/M)` of a known density (then the reference has
        no sampling error).

        >>> import numpy as np
        >>> theta = np.array([[0.0, 0.0, 1.0]])
        >>> atoms = ((np.arange(4) + 0.5) / 2 - 1.0)[None, :, None]  # uniform on S^2: <theta, x> ~ U[-1, 1]
        >>> R = SlicedReference.from_atoms(theta, atoms)
        >>> R(np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]), 0)[0] > 0
        True
        """
        theta = np.asarray(theta, dtype=np.float64)
        atoms = np.asarray(atoms, dtype=np.float64)
        if theta.ndim != 2 or not np.allclose(np.linalg.norm(theta, axis=1), 1.0, atol=1e-12):
            raise InvalidParameterError(f"theta of SlicedReference.from_atoms must be unit rows (L, d); "
                                        f"got shape {theta.shape}.")
        if atoms.ndim != 3 or atoms.shape[2] != len(theta) or np.any(np.diff(atoms, axis=1) < 0):
            raise InvalidParameterError(
                f"atoms of SlicedReference.from_atoms must have shape (T, M, L = {len(theta)}) and be sorted "
                f"along M; got shape {atoms.shape}.")
        self = cls.__new__(cls)
        self.theta, self.atoms = np.ascontiguousarray(theta), atoms
        return self

    @classmethod
    def from_quantile_nodes(cls, theta, nodes, levels=None) -> SlicedReference:
        r"""A reference whose projected quantile functions are piecewise linear: ``nodes`` (T, N, L)
        holds :math:`F_\theta^{-1}(u_j)` at the sorted ``levels`` :math:`0 = u_0 < \dots < u_{N-1} = 1`
        (default :math:`u_j = j/(N-1)`). For a smooth quantile function the interpolation error is
        :math:`O(N^{-2})` instead of the :math:`O(N^{-1})` of N atoms, and :math:`W_2^2` against the
        tokens stays exact (a step function against a linear one on each piece of the merged grid
        :math:`\{i/n\} \cup \{u_j\}`).

        >>> import numpy as np
        >>> theta = np.array([[0.0, 0.0, 1.0]])
        >>> nodes = np.linspace(-1.0, 1.0, 3)[None, :, None]  # uniform on S^2: the quantile function is linear
        >>> R = SlicedReference.from_quantile_nodes(theta, nodes)
        >>> float(round(R.per_projection(np.array([[1.0, 0.0, 0.0]]), 0)[0], 12))  # E T^2 = 1/3, T ~ U[-1, 1]
        0.333333333333
        """
        self = cls.from_atoms(theta, nodes)
        N = self.atoms.shape[1]
        levels = np.linspace(0.0, 1.0, N) if levels is None else np.asarray(levels, dtype=np.float64)
        if N < 2 or levels.shape != (N,) or levels[0] != 0 or levels[-1] != 1 or np.any(np.diff(levels) <= 0):
            raise InvalidParameterError(
                f"SlicedReference.from_quantile_nodes needs nodes of shape (T, N >= 2, L) and levels of shape (N,), "
                f"increasing from 0 to 1; got nodes {self.atoms.shape} and levels {levels.shape}.")
        self.levels = levels
        return self

    def per_projection(self, x: np.ndarray, k: int) -> np.ndarray:
        r""":math:`W_2^2(\theta_\#\mu_x, \theta_\#\nu_k)` for each direction (uniform weights on x).

        ``x`` has shape (n, d), or (..., n, d) for a batch of samples; the result has shape
        (L,), or (..., L).
        """
        x = np.asarray(x, dtype=np.float64)
        lead, n, M = x.shape[:-2], x.shape[-2], self.atoms.shape[1]
        u = np.arange(M + 1) / M if self.levels is None else self.levels
        t = np.union1d(np.arange(n + 1) / n, u)
        mid, length = 0.5 * (t[1:] + t[:-1]), np.diff(t)
        i = np.minimum((mid * n).astype(np.int64), n - 1)
        if self.levels is None:  # atom j on [j/M, (j+1)/M)
            j = np.minimum((mid * M).astype(np.int64), M - 1)
        else:  # a linear reference on piece s runs from nodes[j] + fa (nodes[j+1] - nodes[j]) to ... + fb (...)
            j = np.clip(np.searchsorted(u, mid, side="right") - 1, 0, len(u) - 2)
            w = u[j + 1] - u[j]
            fa, fb = ((t[:-1] - u[j]) / w)[:, None], ((t[1:] - u[j]) / w)[:, None]
        out = np.empty(lead + (len(self.theta),))
        rows = (n + len(u)) * int(np.prod(lead, dtype=np.int64)) * (1 if self.levels is None else 3)
        for c in _chunks(rows, len(self.theta)):
            xs = np.sort(x @ self.theta[c].T, axis=-2)[..., i, :]
            ref = self.atoms[k][:, c]  # the chunk's columns first: gathering all L per chunk costs (n+M) L
            if self.levels is None:
                out[..., c] = np.einsum("m,...ml->...l", length, (xs - ref[j]) ** 2)
                continue
            slope = ref[j + 1] - ref[j]
            da, db = xs - (ref[j] + fa * slope), xs - (ref[j] + fb * slope)
            # exact integral of (x - Q)^2 over the piece, Q linear: length (da^2 + da db + db^2) / 3
            out[..., c] = np.einsum("m,...ml->...l", length / 3, da * da + da * db + db * db)
        return out

    def __call__(self, x: np.ndarray, k: int) -> tuple[float, float]:
        r"""(:math:`SW_2`, its Monte-Carlo standard error by the delta method over directions)."""
        w = self.per_projection(x, k)
        sw = float(np.sqrt(w.mean()))
        se = float(w.std(ddof=1) / np.sqrt(len(w)) / (2 * sw)) if sw > 0 and len(w) > 1 else float("nan")
        return sw, se


def _chunks(rows: int, L: int):
    """Slices of the L directions with rows x (slice length) within the working-memory budget."""
    return row_blocks(L, rows, WORKING_MEMORY_ELEMENTS)
