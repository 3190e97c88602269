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
Every exp head goes through the summation layer (:mod:`particles.summation`, the choice
``summation`` and its error bound ``tol``): the exact pass never overflows, for any β, and
holds O(n · block) memory; the fast routes are O(n log n). ReLU kinds are always exact.

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

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .._core.arrays import check_points
from .._core.blocking import DEFAULT_BLOCK_ELEMENTS
from .._core.declarations import Relation, declare
from .._core.errors import InvalidParameterError, SolverError
from .._core.keywords import keyword_only
from .._core.numerics import is_symmetric
from .._core.params import NONE, AnyOf, Boolean, Instance, Integer
from .._core.params_data import Array
from .._core.sphere import GEOMETRIES, _normalize
from .._summation.exact import HeadSums
from .._summation.plan import DEFAULT_TOL
from .dense import DenseMixin
from .display import model_html, model_repr
from .energies import EnergiesMixin
from .fields import MODEL_FIELDS, MODEL_RELATIONS, OPTION_FIELDS, STATE
from .kinds import (
    KINDS,
    UPDATES,
    Kind,
    LogOverflow,
    apply_update,
    canonical_kind,
    check_fast,
    kind_from_attrs,
    kind_to_attrs,
    resolve_kind,
    usa_overflow_message,
)
from .parameters import build_from_attrs, fields_to_attrs
from .passes import PassesMixin

__all__ = ["MultiHead", "KINDS", "UPDATES", "DEFAULT_BLOCK_ELEMENTS"]


_SUMS = AnyOf(NONE, Instance(list, what="a list of HeadSums, one per head (MultiHead.sums)"))

@declare(relations=MODEL_RELATIONS, **MODEL_FIELDS)
@dataclass(frozen=True, eq=False)
class MultiHead(PassesMixin, EnergiesMixin, DenseMixin):
    r"""H attention heads acting on n tokens; a vector field ``field(t, x)``.

    Parameters
    ----------
    M : array_like of shape (H, d, d) or (d, d)
        Score matrices :math:`M_h = Q_h^\top K_h`.
    W : array_like of shape (H, d, d) or (d, d), optional
        Value matrices; default ``W = M`` (value alignment, Condition 4).
    beta : float in [0, inf)
        Inverse temperature.
    kind : str or Kind
        Attention kind: a name of :data:`particles.KINDS` ("usa", "softmax", "relu", "relu_rownorm",
        ...; module docstring), or a kind object with its parameters (e.g. a bias).
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
    kind: str | Kind = "usa"
    geometry: str = "sphere"
    log_time_scale: float | str = 0.0
    block_elements: int = DEFAULT_BLOCK_ELEMENTS
    summation: str = "auto"
    tol: float = DEFAULT_TOL
    causal: bool = False
    update: str = "standard"
    symmetric: bool = field(init=False)
    aligned: bool = field(init=False)

    def __post_init__(self):  # the fields arrive checked and converted (fields.py)
        M, beta = self.M, self.beta
        W = M.copy() if self.W is None else self.W
        object.__setattr__(self, "kind", canonical_kind(self.kind))  # a kind of default parameters: its name
        c = self.log_time_scale
        if c == "auto":
            c = float(beta * max(np.linalg.norm(m, 2) for m in M)) if self.attention.partition else 0.0
        if self.summation == "fast":
            check_fast(M, beta, self.kind, GEOMETRIES[self.geometry].on_sphere)
        sym = is_symmetric(M)
        aligned = bool(np.array_equal(M, W))
        for name, value in [("W", W), ("log_time_scale", c), ("symmetric", sym), ("aligned", aligned)]:
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:  # the entries stay in .M and .W (display.py)
        return model_repr(self)

    def _repr_html_(self) -> str:
        return model_html(self)

    # ---------------------------------------------------------------- constructors
    @classmethod
    @keyword_only("d")
    @declare(lambdas=Array((0, 1), what="a non-empty 1-D sequence of head strengths"), d=Integer(1), **OPTION_FIELDS)
    def scalar(cls, lambdas, *, d: int, **kwargs) -> MultiHead:
        r"""Scalar heads :math:`M_h = W_h = \\lambda_h I_d` (docs/theory.md §4)."""
        M = np.atleast_1d(lambdas)[:, None, None] * np.eye(d)[None]
        return cls(M, M.copy(), **kwargs)

    @classmethod
    @declare(Q=Array((2, 3), what="an array of shape (H, d_head, d)"), K=Array((2, 3), what="an array of shape "
             "(H, d_head, d)"), W=MODEL_FIELDS["W"], relations=[Relation(("K", "Q"), lambda K, Q: K.shape == Q.shape,
             "must have the shape of Q, (H, d_head, d)", breaks={"K": np.ones((3, 2))})], **OPTION_FIELDS)
    def from_qk(cls, Q, K, W, **kwargs) -> MultiHead:
        r"""Heads from per-head projections Q, K of shape (H, d_head, d) (or (d_head, d)), square
        or rectangular: :math:`M_h = Q_h^\top K_h` (d x d); scale Q by :math:`1/\sqrt{d_{head}}` or
        set β to it for a transformer's logits (:mod:`particles._model.pretrained`)."""
        Q, K = (a[None] if a.ndim == 2 else a for a in (Q, K))
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
        """Validate a state against this model (shape (n, d), finite, on the sphere), the shape first:
        a transposed state is named as such, not sent to be normalised."""
        shape = getattr(x, "shape", ())
        if len(shape) == 2 and shape[1] == self.d:  # the usual state: one pass of checks
            return check_points(x, name, type(self).__name__, on_sphere=self.geom.on_sphere, min_d=1)
        raw, x = x, check_points(x, name, type(self).__name__, on_sphere=False, min_d=1)
        if x.shape[1] != self.d:
            turned = f" (it looks transposed: pass {name}.T)" if x.shape[0] == self.d else ""
            if turned and np.allclose(np.einsum("ij,ij->i", x, x), 1.0, atol=1e-8):  # unit rows: n and d swapped
                turned = (f" (its {x.shape[0]} rows are unit vectors in R^{x.shape[1]}: were n and d swapped where it "
                          f"was made, e.g. sample_uniform({x.shape[0]}, d={x.shape[1]}) for "
                          f"sample_uniform({x.shape[1]}, d={x.shape[0]})?)")
            raise InvalidParameterError(
                f"{name} has d = {x.shape[1]} columns but the heads are {self.d} x {self.d}; "
                f"pass points of shape (n, {self.d}){turned}."
            )
        # (the raw input again: a float32 state off the sphere is told to cast, not to normalise)
        return check_points(raw, name, type(self).__name__, on_sphere=self.geom.on_sphere, min_d=1)

    # ---------------------------------------------------------------- parameters
    @declare(**MODEL_FIELDS)
    def replace(self, **changes) -> MultiHead:
        """A copy with some constructor fields changed (validated like a new model).

        >>> MultiHead(np.eye(3), beta=1.0).replace(beta=2.0).beta
        2.0
        """
        unknown = sorted(set(changes) - set(MODEL_FIELDS))
        if unknown:
            raise InvalidParameterError(f"MultiHead.replace: {unknown} are not fields of MultiHead; the fields are "
                                        f"{sorted(MODEL_FIELDS)}.")
        return dataclasses.replace(self, **changes)

    def to_attrs(self) -> dict:
        """Every constructor field as netCDF-safe attrs (:func:`~particles._model.parameters.fields_to_attrs`),
        plus derived facts; :meth:`from_attrs` inverts it, so no field can be dropped.
        """
        out = fields_to_attrs(self)
        out.update(kind_to_attrs(self.kind))
        out.update(matrix_shape=np.asarray(self.M.shape, dtype=np.int64), n_heads=self.n_heads, d=self.d,
                   score_symmetric=int(self.symmetric), value_aligned=int(self.aligned))
        return out

    @classmethod
    @declare(attrs=Instance(Mapping, what="a mapping of attrs written by MultiHead.to_attrs (e.g. ds.attrs)"))
    def from_attrs(cls, attrs) -> MultiHead:
        """The model recorded by :meth:`to_attrs` (e.g. ``ds.attrs`` after a netCDF round trip).

        >>> m = MultiHead(np.eye(3), beta=2.0, kind="softmax", causal=True)
        >>> MultiHead.from_attrs(m.to_attrs()).causal
        True
        """
        return build_from_attrs(cls, kind_from_attrs(attrs), arrays=("M", "W"), caller="MultiHead.from_attrs")

    @declare(x=STATE, sums=_SUMS, n_sources=AnyOf(NONE, Integer(1)), check=Boolean())
    def outputs(self, x, sums: list[HeadSums] | None = None, *, n_sources: int | None = None,
                check: bool = True) -> np.ndarray:
        r"""Head outputs :math:`f^h_i` of shape (H, m, d) at targets ``x`` from the heads'
        ``sums`` (default: ``self.sums(x)``), by the kind's output rule
        (:data:`~particles._model.kinds.ATTENTION_KINDS`); ``n_sources`` is the n of the
        ReLU 1/n (default: the number of targets). ``check=False`` skips the validation of x
        (for a state the caller validated, e.g. a Runge–Kutta stage).
        """
        x = self.check_x(x) if check else x
        if sums is None:
            return self._head_outputs(x)
        return np.stack([self._output(x, h, p, n_sources) for h, p in enumerate(sums)])

    def _output(self, x: np.ndarray, h: int, p: HeadSums, n_sources: int | None = None) -> np.ndarray:
        n = x.shape[0] if n_sources is None else n_sources
        try:
            return self.attention.output(p, self.W[h].T, n, self.log_time_scale)
        except LogOverflow as exc:
            raise SolverError(usa_overflow_message(h, exc.args[0], self.beta, x)) from None

    def velocity_scale(self, n: int) -> float:
        r"""The factor of :math:`\sum_h f^h_i` in the velocity (1/n for USA heads, else 1)."""
        return self.attention.scale(n)

    # ---------------------------------------------------------------- public API
    def head_outputs(self, x) -> np.ndarray:
        r"""Head outputs :math:`f^h_i` of shape (H, n, d) (before projection)."""
        x = self.check_x(x)
        return self._head_outputs(x)

    @property
    def gradient_flow(self) -> bool:
        """True when the field is n · grad E_multi (Theorem 11): USA heads, C3, C4, no mask, standard update."""
        standard = not self.causal and self.update == "standard"
        return self.attention.partition and self.symmetric and self.aligned and standard

    @property
    def attention(self) -> Kind:
        """This model's kind object (:data:`particles.extend.ATTENTION_KINDS`, or the kind with its
        parameters): its passes and rules."""
        return resolve_kind(self.kind)

    @property
    def variant(self) -> bool:
        """True for causal masking or a non-standard update (these bypass the blocked sums)."""
        return bool(self.causal) or self.update != "standard"

    def _head_outputs(self, x: np.ndarray, sums: list[HeadSums] | None = None) -> np.ndarray:
        if self.update == "pre_ln":
            x = _normalize(x)  # attention reads the normalised tokens; the stream itself is not
        if self.causal:
            return np.einsum("hij,jd,hed->hie", self._dense_weights(x), x, self.W)
        sums = self.sums(x, check=False) if sums is None else sums
        return np.stack([self._output(x, h, p) for h, p in enumerate(sums)])

    @declare(x=STATE)
    def velocity(self, x) -> np.ndarray:
        r"""The field :math:`\dot x_i = P_{x_i} v_i` (sphere) or :math:`v_i` (flat), shape (n, d)."""
        x = self.check_x(x)
        return self._velocity(x)

    def _velocity(self, x: np.ndarray) -> np.ndarray:
        if self.variant:
            v = self._head_outputs(x).sum(axis=0) * self.velocity_scale(x.shape[0])
            return apply_update(self.update, self.geom, x, v)
        # the outputs' GEMMs too: a BLAS worker they woke would spin through the next call's pass
        with self._blas_single(x.shape[0] ** 2):
            sums = self.sums(x, check=False)
            v = self._output(x, 0, sums[0])
            for h in range(1, self.n_heads):
                v += self._output(x, h, sums[h])
            v *= self.velocity_scale(x.shape[0])
            return self.geom.project_tangent(x, v)

    def __call__(self, t: float, x: np.ndarray) -> np.ndarray:
        """``field(t, x)`` for :func:`particles.simulate` (no validation: the solver validated x0)."""
        return self._velocity(x)

    @declare(x=STATE, sums=_SUMS, clip=AnyOf(NONE, Boolean()))
    def entropy(self, x, sums: list[HeadSums] | None = None, *, clip: bool | None = None) -> np.ndarray:
        r"""Attention entropy :math:`H^h_i = -\sum_j p_{ij}\log p_{ij}`, softmax weights, shape (H, m).

        Computed without the n×n matrix as :math:`\log Z_i - \beta\langle x_i, M\bar x_i\rangle`
        from the heads' exp ``sums`` (default: ``self.sums(x)``, the tokens attending to
        themselves, where :math:`0 \le H \le \log n` and ``clip`` (default: True when the
        sums are computed here) removes round-off). For sums over weighted sources
        :math:`p_{ij} = w_j e^{\beta s_{ij}}/Z_i` and the value is
        :math:`-\sum_j p_{ij}\log(p_{ij}/w_j)` (:math:`H - \log n` for w = 1/n; do not clip).
        """
        x = self.check_x(x)
        own = sums is None if clip is None else clip
        sums = self._exp_sums(x) if sums is None else sums
        ent = np.stack([p.logz - self.beta * np.einsum("id,de,ie->i", x, self.M[h], p.mean)
                        for h, p in enumerate(sums)])
        # H <= log n exactly; round-off can push a uniform row a few ulps over
        return np.clip(ent, 0.0, np.log(x.shape[0])) if own else ent
