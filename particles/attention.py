r"""Multi-head self-attention as a vector field on the sphere (or in flat space).

The model (docs/theory.md §1). Tokens :math:`x_1..x_n` on :math:`S^{d-1}`, heads
:math:`h = 1..H` with score matrices :math:`M_h = Q_h^\top K_h` and value matrices
:math:`W_h`, scores :math:`s^h_{ij} = \langle x_i, M_h x_j\rangle`. Head outputs

- ``"usa"`` (unnormalised): :math:`f^h_i = \sum_j e^{\beta s^h_{ij}} W_h x_j`,
  velocity :math:`v_i = \frac1n \sum_h f^h_i`;
- ``"softmax"``: :math:`f^h_i = \sum_j \operatorname{softmax}_j(\beta s^h_{i\cdot}) W_h x_j`,
  :math:`v_i = \sum_h f^h_i`;
- ``"relu"``: :math:`f^h_i = \frac1n\sum_j \mathrm{ReLU}(\beta s^h_{ij}) W_h x_j`,
  :math:`v_i = \sum_h f^h_i`;
- ``"relu_rownorm"``: weights :math:`\mathrm{ReLU}(\beta s_{ij}) / \sum_k \mathrm{ReLU}(\beta s_{ik})`
  (a row whose scores are all :math:`\le 0` attends to nothing and contributes 0).

and the dynamics :math:`\dot x_i = P_{x_i} v_i` on the sphere, :math:`\dot x_i = v_i` in
flat space, with :math:`P_x = I - x x^\top`.

Numerics and cost
-----------------
Every exp head goes through the summation layer (:mod:`particles.summation`):
``summation="exact"`` is the blocked pass below, ``"fast"`` the NUFFT routes (O(n log n)
for scalar heads on S^1 and S^2 and heads of rank ≤ 3 on any sphere) with an a-posteriori
bound ``tol`` on the relative error of every partition function, and ``"auto"`` (default)
takes the fast route where it is cheaper and its bound holds, the exact pass elsewhere.
ReLU kinds are always exact. In the exact pass each head is one blocked pass over rows: for a block of rows the logits
:math:`\beta s_{ij} - m_i` come out of a single GEMM on augmented matrices
:math:`[\beta X M, -m]\,[X, 1]^\top`, with the shift :math:`m_i = \beta\|M^\top x_i\|\max_j\|x_j\|
\ge \max_j \beta s_{ij}` (Cauchy–Schwarz), so ``exp`` never overflows, for any β; a second
GEMM against :math:`[X, 1]` returns the weighted means and the row partition functions
together. Memory is O(n · block) instead of O(n²). Rows whose partition function underflows
(the bound far above the true maximum, only at very large β‖M‖) are recomputed with the
exact row maximum. The value matrix is applied after the mean: :math:`f_i = W\bar x_i`.

USA outputs grow like :math:`e^{\beta\|M\|}` and overflow float64 past β‖M‖ ≈ 700; pass
``log_time_scale="auto"`` to integrate in the rescaled time :math:`t' = e^{c} t`
(:math:`c = \beta\max_h\|M_h\|_{op}`), which multiplies the velocity by :math:`e^{-c}` and
leaves trajectories unchanged.

References
----------
arXiv:2605.04279, *Gradient Flow Structure and Quantitative Dynamics of Multi-Head
Self-Attention*; Geshkovski, Letrouit, Polyanskiy, Rigollet, arXiv:2312.10794.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from .sphere import GEOMETRIES, normalize
from .summation import DEFAULT_TOL, SUMMATIONS, HeadSums, exp_sums, fast_route, relu_sums
from .validation import (
    InvalidParameterError,
    SolverError,
    check_choice,
    check_param,
    check_points,
    check_real_array,
    check_square_stack,
)

__all__ = ["MultiHead", "KINDS", "UPDATES", "DEFAULT_BLOCK_ELEMENTS"]

#: how head outputs become the velocity (model variants of the reference codes), and the
#: geometry each needs: v_i = scale · Σ_h f_i^h, then
#: "standard": P_{x_i} v_i (sphere) or v_i (flat);
#: "pre_ln" (flat): v_i computed from the normalised tokens x_j/‖x_j‖ (pre-LN residual stream);
#: "post_ln" (sphere): v_i unprojected, so that Euler with the retraction is the post-LN layer
#: x ← (x + dt v)/‖x + dt v‖, whose dt → 0 limit is the sphere flow;
#: "ngpt" (sphere): P_{x_i}(v_i/‖v_i‖), the continuous nGPT update (normalised step direction).
UPDATES = {"standard": None, "pre_ln": "flat", "post_ln": "sphere", "ngpt": "sphere"}

#: attention kinds and whether their weights come from the exponential pass
KINDS = {"usa": "exp", "softmax": "exp", "relu": "relu", "relu_rownorm": "relu"}

#: entries of one (block x n) logit tile; 2**18 doubles = 2 MiB stays in cache
DEFAULT_BLOCK_ELEMENTS = 2**18

_LOG_OVERFLOW = 700.0
# below this n the tile bookkeeping of the symmetric pass costs more than the exps it saves
_SYMMETRIC_MIN_N = 512


@dataclass(frozen=True, eq=False)
class MultiHead:
    r"""H attention heads acting on n tokens; a vector field ``field(t, x)``.

    Parameters
    ----------
    M : array_like of shape (H, d, d) or (d, d)
        Score matrices :math:`M_h = Q_h^\top K_h`.
    W : array_like of shape (H, d, d) or (d, d), optional
        Value matrices; default ``W = M`` (value alignment, Condition 4).
    beta : float in [0, inf)
        Inverse temperature.
    kind : {"usa", "softmax", "relu", "relu_rownorm"}
        Attention kind (module docstring).
    geometry : {"sphere", "flat"}
        Projected dynamics on S^{d-1} or free dynamics in R^d.
    log_time_scale : float or "auto"
        c such that the velocity is multiplied by :math:`e^{-c}` (time rescaled by
        :math:`e^{c}`); ``"auto"`` picks :math:`c = \beta\max_h\|M_h\|_{op}` for USA heads,
        0 otherwise. Energy rates are reported in the same scaled units.
    block_elements : int
        Entries of one logit tile (memory O(block_elements) per head pass).
    summation : {"auto", "exact", "fast"}
        How the exponential sums are evaluated (:mod:`particles.summation`): ``"fast"``
        raises if a head has no fast route (ReLU kinds, rank > 3, d > 3 scalar heads) or its
        bound cannot meet ``tol``; ``"auto"`` falls back to exact there and wherever its
        cost model finds the exact pass cheaper (below ~2000 tokens, or a few thousand at
        large β on S^2), logging why on the ``headflow.summation`` logger.
    tol : float in (0, 1)
        Bound on the relative error of every partition function :math:`Z_i` on the fast
        path (velocities err by at most ``2 * tol * max|W|``).
    causal : bool
        Causal masking: token i attends to tokens j <= i only (dense exact sums, O(H n²)
        memory). Token 1 then evolves on its own and token k depends only on tokens <= k;
        E_multi is no longer a Lyapunov function (``gradient_flow`` is False).
    update : {"standard", "pre_ln", "post_ln", "ngpt"}
        How head outputs become the velocity (:data:`UPDATES`); ``"pre_ln"`` needs
        ``geometry="flat"``, ``"post_ln"`` and ``"ngpt"`` need ``geometry="sphere"``.

    Examples
    --------
    >>> model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")
    >>> x = np.eye(3)
    >>> model.velocity(x).shape
    (3, 3)
    """

    M: np.ndarray
    W: np.ndarray | None = None
    beta: float = 1.0
    kind: str = "usa"
    geometry: str = "sphere"
    log_time_scale: float | str = 0.0
    block_elements: int = DEFAULT_BLOCK_ELEMENTS
    summation: str = "auto"
    tol: float = DEFAULT_TOL
    causal: bool = False
    update: str = "standard"
    symmetric: bool = field(init=False)
    aligned: bool = field(init=False)

    def __post_init__(self):
        caller = "MultiHead"
        M = check_square_stack(self.M, "M", caller=caller)
        d = M.shape[1]
        W = M.copy() if self.W is None else check_square_stack(self.W, "W", d=d, caller=caller)
        if W.shape[0] != M.shape[0]:
            raise InvalidParameterError(
                f"W of MultiHead must hold one value matrix per head: M has {M.shape[0]} heads, W has "
                f"{W.shape[0]}. Pass W of shape ({M.shape[0]}, {d}, {d}) or W=None (W = M)."
            )
        beta = check_param(self.beta, "beta", caller, low=0.0)
        check_choice(self.kind, "kind", KINDS, caller)
        check_choice(self.geometry, "geometry", GEOMETRIES, caller)
        if isinstance(self.log_time_scale, str):
            if self.log_time_scale != "auto":
                raise InvalidParameterError(
                    f"The 'log_time_scale' parameter of MultiHead must be a float or 'auto'; got {self.log_time_scale!r}."
                )
            opnorm = max(np.linalg.norm(m, 2) for m in M)
            c = beta * opnorm if self.kind == "usa" else 0.0
        else:
            c = check_param(self.log_time_scale, "log_time_scale", caller)
        block = check_param(self.block_elements, "block_elements", caller, low=1, integer=True)
        check_choice(self.summation, "summation", SUMMATIONS, caller)
        tol = check_param(self.tol, "tol", caller, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.summation == "fast":
            _check_fast(M, beta, self.kind, GEOMETRIES[self.geometry].on_sphere)
        if not isinstance(self.causal, (bool, np.bool_)):
            raise InvalidParameterError(f"The 'causal' parameter of MultiHead must be a bool; got {self.causal!r}.")
        if self.causal and self.summation == "fast":
            raise InvalidParameterError("causal=True is exact-only: use summation='exact' or 'auto'.")
        check_choice(self.update, "update", UPDATES, caller)
        need = UPDATES[self.update]
        if need is not None and need != self.geometry:
            raise InvalidParameterError(
                f"update={self.update!r} of MultiHead needs geometry={need!r}; got geometry={self.geometry!r}."
            )
        scale = max(1.0, float(np.max(np.abs(M))))
        sym = bool(np.max(np.abs(M - M.transpose(0, 2, 1))) <= 1e-14 * scale)
        aligned = bool(np.array_equal(M, W))
        for name, value in [("M", M), ("W", W), ("beta", beta), ("log_time_scale", c),
                            ("block_elements", block), ("tol", tol), ("symmetric", sym), ("aligned", aligned)]:
            object.__setattr__(self, name, value)

    # ---------------------------------------------------------------- constructors
    @classmethod
    def scalar(cls, lambdas, d: int, **kwargs) -> MultiHead:
        """Scalar heads :math:`M_h = W_h = \\lambda_h I_d` (docs/theory.md §4)."""
        lam = np.atleast_1d(check_real_array(lambdas, "lambdas", "MultiHead.scalar", ndim=(0, 1),
                                             expected="a non-empty 1-D sequence of head strengths"))
        d = check_param(d, "d", "MultiHead.scalar", low=1, integer=True)
        M = lam[:, None, None] * np.eye(d)[None]
        return cls(M, M.copy(), **kwargs)

    @classmethod
    def from_qk(cls, Q, K, W, **kwargs) -> MultiHead:
        r"""Heads from query/key matrices: :math:`M_h = Q_h^\top K_h`."""
        Q = check_square_stack(Q, "Q", caller="MultiHead.from_qk")
        K = check_square_stack(K, "K", d=Q.shape[1], caller="MultiHead.from_qk")
        if K.shape[0] != Q.shape[0]:
            raise InvalidParameterError("Q and K must have the same number of heads.")
        return cls(np.einsum("hki,hkj->hij", Q, K), W, **kwargs)

    # ---------------------------------------------------------------- basic facts
    @property
    def n_heads(self) -> int:
        return self.M.shape[0]

    @property
    def d(self) -> int:
        """Ambient dimension."""
        return self.M.shape[1]

    @property
    def geom(self):
        return GEOMETRIES[self.geometry]

    def check_x(self, x, name: str = "x") -> np.ndarray:
        """Validate a state against this model (shape (n, d), finite, on the sphere)."""
        x = check_points(x, name, type(self).__name__, on_sphere=self.geom.on_sphere, min_d=1)
        if x.shape[1] != self.d:
            raise InvalidParameterError(
                f"{name} has d = {x.shape[1]} columns but the heads are {self.d} x {self.d}; "
                f"pass points of shape (n, {self.d})."
            )
        return x

    # ---------------------------------------------------------------- passes
    def _exp_sums(self, x: np.ndarray, *, sources: np.ndarray | None = None, weights: np.ndarray | None = None,
                  transpose: bool = False) -> list[HeadSums]:
        """Z_i and softmax means of every head at targets x (sources default: x), weighted sources.

        s_ij = <x_i, M y_j> = (x_i^T M) y_j: the logit matrix of head h is β M_h (β M_hᵀ transposed).
        """
        same = sources is None
        y = x if same else sources
        BM = self.beta * (self.M.transpose(0, 2, 1) if transpose else self.M)
        return exp_sums(BM, x, y, weights, summation=self.summation, tol=self.tol,
                        on_sphere=self.geom.on_sphere, block_elements=self.block_elements, same_points=same,
                        symmetric=self.symmetric and x.shape[0] >= _SYMMETRIC_MIN_N)

    def _relu_sums(self, x: np.ndarray, h: int) -> HeadSums:
        # row-normalised ReLU weights do not depend on β > 0 (ReLU(βs) = β ReLU(s)), so β stays out
        scale = 1.0 if (self.kind == "relu_rownorm" and self.beta > 0) else self.beta
        return relu_sums(x @ (scale * self.M[h]), x, self.block_elements)

    def _sums(self, x: np.ndarray) -> list[HeadSums]:
        """The sums of the model's own kind, every head."""
        if KINDS[self.kind] == "exp":
            return self._exp_sums(x)
        return [self._relu_sums(x, h) for h in range(self.n_heads)]

    def _outputs_from(self, x: np.ndarray, h: int, p: HeadSums) -> np.ndarray:
        """f_i^h of the model's kind from a pass of the matching type."""
        n = x.shape[0]
        Wt = self.W[h].T
        if self.kind == "softmax":
            return p.mean @ Wt
        if self.kind == "usa":
            logscale = p.logz - self.log_time_scale
            top = float(logscale.max())
            if top > _LOG_OVERFLOW:
                raise SolverError(_usa_overflow_message(h, top, self.beta, x))
            return np.exp(logscale)[:, None] * (p.mean @ Wt)
        if self.kind == "relu":
            return (p.mean @ Wt) / n
        # relu_rownorm: a row attending to nothing contributes zero
        tot = p.total
        safe = np.where(tot > 0, tot, 1.0)
        return np.where((tot > 0)[:, None], p.mean / safe[:, None], 0.0) @ Wt

    def _velocity_scale(self, n: int) -> float:
        return 1.0 / n if self.kind == "usa" else 1.0

    # ---------------------------------------------------------------- public API
    def head_outputs(self, x) -> np.ndarray:
        r"""Head outputs :math:`f^h_i` of shape (H, n, d) (before projection)."""
        x = self.check_x(x)
        return self._head_outputs(x)

    @property
    def gradient_flow(self) -> bool:
        """True when the field is n · grad E_multi (Theorem 11): USA heads, C3, C4, no mask, standard update."""
        return self.kind == "usa" and self.symmetric and self.aligned and not self.causal and self.update == "standard"

    @property
    def variant(self) -> bool:
        """True for causal masking or a non-standard update (these bypass the blocked sums)."""
        return bool(self.causal) or self.update != "standard"

    def _head_outputs(self, x: np.ndarray, sums: list[HeadSums] | None = None) -> np.ndarray:
        if self.update == "pre_ln":
            x = normalize(x)  # attention reads the normalised tokens; the stream itself is not
        if self.causal:
            return np.einsum("hij,jd,hed->hie", self._dense_weights(x), x, self.W)
        sums = self._sums(x) if sums is None else sums
        return np.stack([self._outputs_from(x, h, p) for h, p in enumerate(sums)])

    def velocity(self, x) -> np.ndarray:
        r"""The field :math:`\dot x_i = P_{x_i} v_i` (sphere) or :math:`v_i` (flat), shape (n, d)."""
        x = self.check_x(x)
        return self._velocity(x)

    def _velocity(self, x: np.ndarray) -> np.ndarray:
        if self.variant:
            v = self._head_outputs(x).sum(axis=0) * self._velocity_scale(x.shape[0])
            if self.update in ("pre_ln", "post_ln"):
                return v
            if self.update == "ngpt":
                norm = np.linalg.norm(v, axis=1, keepdims=True)
                v = np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)
            return self.geom.project_tangent(x, v)
        sums = self._sums(x)
        v = self._outputs_from(x, 0, sums[0])
        for h in range(1, self.n_heads):
            v += self._outputs_from(x, h, sums[h])
        v *= self._velocity_scale(x.shape[0])
        return self.geom.project_tangent(x, v)

    def __call__(self, t: float, x: np.ndarray) -> np.ndarray:
        """``field(t, x)`` for :func:`particles.simulate` (no validation: the solver validated x0)."""
        return self._velocity(x)

    def scores(self, x) -> np.ndarray:
        r"""Dense scores :math:`s^h_{ij}`, shape (H, n, n). O(H n²) memory: for small n."""
        x = self.check_x(x)
        return np.einsum("id,hde,je->hij", x, self.M, x)

    def weights(self, x) -> np.ndarray:
        r"""Dense attention weights of the model's kind, shape (H, n, n) (for small n).

        USA: :math:`e^{\beta s}` (times :math:`e^{-c}`); softmax: row-stochastic;
        ReLU: :math:`\mathrm{ReLU}(\beta s)/n`; row-normalised ReLU: rows sum to 1 or 0.
        The velocity is ``P_x (scale * Σ_h weights[h] @ x @ W[h].T)`` with scale 1/n for USA.
        With ``causal=True`` the weights of j > i are zero (softmax rows normalised over j <= i).
        """
        return self._dense_weights(self.check_x(x))

    def _dense_weights(self, x: np.ndarray) -> np.ndarray:
        scale = 1.0 if (self.kind == "relu_rownorm" and self.beta > 0) else self.beta
        s = scale * np.einsum("id,hde,je->hij", x, self.M, x)
        if self.causal:
            n = x.shape[0]
            s = np.where(np.tril(np.ones((n, n), dtype=bool))[None], s, -np.inf)
        if self.kind == "softmax":
            return np.exp(s - logsumexp(s, axis=-1, keepdims=True))
        if self.kind == "usa":
            top = float(s.max()) - self.log_time_scale
            if top > _LOG_OVERFLOW:  # the same refusal as the velocity: no inf weights
                raise SolverError(_usa_overflow_message(int(np.argmax(s.reshape(len(s), -1).max(axis=1))), top,
                                                        self.beta, x))
            return np.exp(s - self.log_time_scale)
        r = np.maximum(s, 0.0)
        if self.kind == "relu":
            return r / s.shape[-1]
        tot = r.sum(-1, keepdims=True)
        return np.divide(r, tot, out=np.zeros_like(r), where=tot > 0)

    def log_head_energies(self, x) -> np.ndarray:
        r"""Log-energies :math:`\log E_h = \operatorname{logsumexp}_{ij}(\beta s^h_{ij}) - \log(2\beta n^2)`, shape (H,).

        Finite for every β > 0 (no overflow). At β = 0 the energy is infinite; use
        :meth:`head_energies`, which returns the finite part there.
        """
        x = self.check_x(x)
        if self.beta == 0:
            raise InvalidParameterError(
                "log_head_energies needs beta > 0 (E_h = +inf at beta = 0); use head_energies, "
                "which returns the finite part lim (E_h - 1/(2 beta)) there."
            )
        n = x.shape[0]
        return np.array([logsumexp(p.logz) for p in self._exp_sums(x)]) - np.log(2 * self.beta * n * n)

    def head_energies(self, x) -> np.ndarray:
        r"""Energies :math:`E_h = \frac{1}{2\beta n^2}\sum_{ij} e^{\beta s^h_{ij}}`, shape (H,).

        At β = 0 returns the finite part :math:`\lim_{\beta\to0}(E_h - \tfrac1{2\beta}) =
        \frac1{2n^2}\sum_{ij} s^h_{ij}`, which has the same time derivative. Values past
        float64 range are returned as +inf; use :meth:`log_head_energies` there.
        """
        x = self.check_x(x)
        if self.beta == 0:
            n = x.shape[0]
            xs = x.sum(axis=0)
            return np.einsum("d,hde,e->h", xs, self.M, xs) / (2 * n * n)
        return _safe_exp(self.log_head_energies(x))

    def energy(self, x) -> float:
        r""":math:`E_{multi} = \sum_h E_h` (see :meth:`head_energies`)."""
        return float(np.sum(self.head_energies(x)))

    def energy_gradient(self, x) -> np.ndarray:
        r"""Euclidean gradient :math:`\nabla_{x_i} E_{multi}`, shape (n, d), times :math:`e^{-c}`.

        :math:`\nabla_{x_i} E_h = \frac{1}{2n^2}\big[Z_i M_h\bar x_i + Z'_i M_h^\top \bar x'_i\big]`
        with :math:`Z_i, \bar x_i` the partition function and softmax mean of row i of
        :math:`e^{\beta s}` and :math:`Z', \bar x'` those of its transpose. Under C3 this is
        :math:`f_i/n^2` for aligned USA heads. Entries past the float64 range are ±inf (never NaN),
        as :math:`E_h` is then; ``log_time_scale`` rescales them.
        """
        x = self.check_x(x)
        terms = [t for h_terms in self._gradient_terms(x, self._exp_sums(x)) for t in h_terms]
        # Σ over heads of e^{log z} g in the log domain: heads of opposite signs past float64 give
        # their signed sum (±inf), not inf − inf
        a = np.stack([np.broadcast_to(logz[:, None], g.shape) for logz, g in terms])
        log_abs, sign = _signed_logsumexp(a, np.stack([g for _, g in terms]), axis=0)
        return sign * _safe_exp(log_abs)

    def _head_gradients(self, x: np.ndarray, sums: list[HeadSums]) -> np.ndarray:
        """∇E_h (times e^{-c}) of every head, shape (H, n, d), from the heads' exp sums."""
        return np.stack([sum(_scaled(logz, g) for logz, g in terms) for terms in self._gradient_terms(x, sums)])

    def _gradient_terms(self, x: np.ndarray, sums: list[HeadSums]) -> list:
        """Per head, the terms (log z_i, g_i) of ∇_{x_i}E_h = Σ_terms e^{log z_i} g_i (times e^{-c}): one
        term if M_h is symmetric (s_ji = s_ij: both halves coincide), else the row and column halves
        (the transposed sums are computed only then)."""
        n = x.shape[0]
        if self.symmetric:
            c = self.log_time_scale + 2 * np.log(n)
            return [[(p.logz - c, p.mean @ self.M[h].T)] for h, p in enumerate(sums)]
        sums_t = self._exp_sums(x, transpose=True)
        c = self.log_time_scale + np.log(2 * n * n)
        return [[(p.logz - c, p.mean @ self.M[h].T), (q.logz - c, q.mean @ self.M[h])]
                for h, (p, q) in enumerate(zip(sums, sums_t))]

    def entropy(self, x) -> np.ndarray:
        r"""Attention entropy :math:`H^h_i = -\sum_j p_{ij}\log p_{ij}`, softmax weights, shape (H, n).

        Computed without the n×n matrix as :math:`\log Z_i - \beta\langle x_i, M\bar x_i\rangle`.
        """
        x = self.check_x(x)
        return np.stack([self._entropy_from(x, h, p) for h, p in enumerate(self._exp_sums(x))])

    def _entropy_from(self, x, h, p: HeadSums) -> np.ndarray:
        ent = p.logz - self.beta * np.einsum("id,de,ie->i", x, self.M[h], p.mean)
        # H <= log n exactly; round-off can push a uniform row a few ulps over
        return np.clip(ent, 0.0, np.log(x.shape[0]))


def _check_fast(M: np.ndarray, beta: float, kind: str, on_sphere: bool) -> None:
    """Refuse summation='fast' up front where no head can take a fast route."""
    if KINDS[kind] != "exp":
        raise InvalidParameterError(
            f"summation='fast' needs exponential heads; kind={kind!r} (ReLU) is not smooth and has no fast "
            "path with a proven error. Use summation='exact' or 'auto'."
        )
    for h, Mh in enumerate(M):
        info = fast_route(beta * Mh, on_sphere)
        if info.route is None:
            raise InvalidParameterError(
                f"summation='fast' cannot be used for head {h}: {info.reason}. Use summation='auto' or 'exact'."
            )


def _safe_exp(a: np.ndarray) -> np.ndarray:
    """exp that returns +inf past the float64 range instead of warning."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.inf)
    ok = a < _LOG_OVERFLOW + 9.0
    out[ok] = np.exp(a[ok])
    return out


def _signed_logsumexp(a: np.ndarray, b: np.ndarray, axis=None) -> tuple[np.ndarray, np.ndarray]:
    """(log|Σ b e^a|, sign of the sum) along ``axis``; an exactly zero sum gives (-inf, 0).

    Terms with b = 0 are dropped before the shift (scipy's ``logsumexp(..., b=, return_sign=True)``
    returns NaN when every b is 0 or the terms cancel exactly at large a).
    """
    a = np.where(b != 0, a, -np.inf)
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = np.sum(b * np.exp(a - top), axis=axis)
    with np.errstate(divide="ignore"):
        log_abs = np.log(np.abs(total)) + np.squeeze(top, axis=axis)
    return log_abs, np.sign(total)


def _scaled(logz: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Rows e^{logz_i} g_i: ±inf where the product is past float64, exactly 0 where g_ij = 0 (never
    inf · 0 = NaN); the scale is folded into the log first so that no finite product overflows early."""
    out = np.zeros_like(g)
    nz = g != 0
    with np.errstate(over="ignore"):
        out[nz] = np.sign(g[nz]) * np.exp(np.broadcast_to(logz[:, None], g.shape)[nz] + np.log(np.abs(g[nz])))
    return out


def _usa_overflow_message(h: int, top: float, beta: float, x: np.ndarray) -> str:
    """Why a USA head overflowed: the log-weight itself (never its exponential), and whether
    the state had left the sphere (a Runge–Kutta stage pushed off by a huge velocity)."""
    msg = (f"USA head {h} overflows float64 at beta={beta:g}: the log of its largest row weight is "
           f"{top:.4g} > {_LOG_OVERFLOW:g}")
    R = float(np.sqrt(np.max(np.einsum("ij,ij->i", x, x))))
    if R > 1.0 + 1e-6:
        msg += (f", evaluated at a Runge–Kutta stage state that left the sphere (max ‖x_i‖ = {R:.3g}): "
                "the velocity, of order exp(beta ‖M‖)/n, is far too large for this dt")
    return msg + ". Build the model with log_time_scale='auto' to integrate in rescaled time."
