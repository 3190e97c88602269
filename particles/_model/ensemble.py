r"""Many small independent systems at once: a batched attention field.

:class:`Ensemble` evaluates the velocity of S independent token systems of the same size,
stacked as ``x`` of shape (S, n, d), sharing the heads (M_h, W_h) and the kind but each
with its own inverse temperature ``beta[s]``. It is a field for :func:`particles.simulate`
(which then integrates the whole stack at once, with every stepper of ``STEPPERS``) and is
built for phase-diagram workloads: thousands of systems with n ≲ 100, where one system at a
time would be dominated by Python overhead.

Cost and memory: O(S n² H) exps per evaluation, done in chunks of ``chunk`` systems, so
memory is O(chunk · n²). Softmax logits are shifted by the Cauchy–Schwarz bound
:math:`\beta\|M^\top x_i\|` (no max pass, no overflow); USA heads take the same shifted pass
and scale its sums by :math:`e^c/n` (c the shift; a :class:`particles.SolverError` names the
system when a row weight :math:`\log(Z_i/n)` passes the float64 range). The sums are always
exact: at n ≲ 100 per system the NUFFT set-up of :mod:`particles.summation` costs more than
the n² exps it would save, so the fast path does not help here.

Scalar heads (M_h = m_h I, W_h = w_h I, softmax or USA: the phase-diagram case) take the fused
pass of :mod:`~particles._model.ensemble_kernels`: one shift per system (a scalar pass over the
logits), both batched GEMMs read contiguous operands, and the buffers are reused across calls. Several
softmax heads of one score direction (all :math:`m_h > 0`) share one pass
(:mod:`~particles._model.ensemble_shared`): one Gram matrix and one exp per evaluation, :math:`E_h = E^{\circ k_h}`
for integer ratios :math:`k_h = m_h/\min_h m_h`, the row-normalised heads combined before one sums GEMM. Systems
that can no longer change stop moving in the field :meth:`Ensemble.settling`
(:meth:`Ensemble.settled`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.arrays import check_finite, check_real_array, unit_hint
from .._core.declarations import declare
from .._core.numerics import scalar_of
from .._core.params import Instance, Integer
from .._core.params_data import Array, States
from .._core.sphere import GEOMETRIES
from .._core.validation import InvalidParameterError, check_param
from .._summation.record import note_exact
from .ensemble_kernels import WORK, check_overflow, scalar_head
from .ensemble_shared import share_heads, shared_heads
from .fields import MODEL_FIELDS, MODEL_RELATIONS
from .kinds import Kind, LogOverflow, canonical_kind, consensus_rate, resolve_kind
from .settled import SettledMixin

__all__ = ["Ensemble"]

#: the generic rules of a state stack (S, n, d) and a cap diameter (the ensemble's own: Ensemble.check_x)
_STATES = States(on_sphere=False)


@declare(M=MODEL_FIELDS["M"], W=MODEL_FIELDS["W"], beta=Array((0, 1), what="a 1-D array of shape (S,)"),
         kind=MODEL_FIELDS["kind"], geometry=MODEL_FIELDS["geometry"], chunk=Integer(1),
         relations=MODEL_RELATIONS[:1])
@dataclass(frozen=True, eq=False)
class Ensemble(SettledMixin):
    r"""S independent systems :math:`\dot x^{(s)}_i = P_{x_i}\sum_h\sum_j A^{h,(s)}_{ij} W_h x^{(s)}_j`.

    Parameters
    ----------
    M, W : array_like of shape (H, d, d) or (d, d)
        Shared score and value matrices (``W=None`` means W = M).
    beta : array_like of shape (S,)
        One inverse temperature per system.
    kind : str or Kind
        An attention kind of :data:`particles.KINDS`, or a kind object with its parameters (its batched
        pass and output rule, :mod:`~particles._model.kinds`).
    geometry : {"sphere", "flat"}
    chunk : int
        Systems per evaluation chunk.

    Notes
    -----
    Off the sphere (the stages of an explicit stepper) a USA velocity is evaluated at
    :math:`x_i/\|x_i\|`: the field is extended as a function of the direction only, so the radial
    direction carries no dynamics. The polynomial extension contracts radially at rate
    :math:`2\sum_j a_{ij}`, :math:`2e^\beta m/n` in a USA cluster of m tokens, a stiffness of
    the extension, not of the flow (softmax rows sum to one: rate <= 2, kept as it is).

    Examples
    --------
    >>> ens = Ensemble(np.eye(2), beta=[1.0, 5.0])
    >>> x = np.stack([np.eye(2), np.eye(2)])
    >>> ens.velocity(x).shape
    (2, 2, 2)
    """

    M: np.ndarray
    W: np.ndarray | None = None
    beta: np.ndarray = None
    kind: str | Kind = "softmax"
    geometry: str = "sphere"
    chunk: int = 2048
    #: the velocity keeps no reference to its input (steppers may reuse their stage buffers)
    reads_state_only = True
    writes_into = True  # __call__(t, x, out=buf) writes the velocity into buf (the field protocol)

    def __post_init__(self):
        # the fields arrive checked and converted (the declaration above; W pairs with M head by head)
        M = self.M
        W = M.copy() if self.W is None else self.W
        beta = np.atleast_1d(self.beta)
        if np.any(beta < 0):
            raise InvalidParameterError(f"The 'beta' parameter of Ensemble must be >= 0; got min {beta.min():g}.")
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "kind", canonical_kind(self.kind))
        # scalar heads (M_h = m_h I, W_h = w_h I) of a kind with a fused pass take it (ensemble_kernels)
        heads = [(scalar_of(m), scalar_of(w)) for m, w in zip(M, W)]
        fused = self.attention.exp_rule is not None and all(
            m is not None and w is not None for m, w in heads)
        object.__setattr__(self, "_scalar_heads", tuple(heads) if fused else None)
        # softmax heads of one score direction (m_h > 0) share one Gram matrix, exp and sums GEMM (ensemble_shared)
        object.__setattr__(self, "_shared", share_heads(heads, self.attention.normalised) if fused else None)

    @property
    def attention(self) -> Kind:
        """This ensemble's kind object: its batched pass and rules."""
        return resolve_kind(self.kind)

    @property
    def geom(self):
        return GEOMETRIES[self.geometry]

    @property
    def n_systems(self) -> int:
        return self.beta.size

    def check_x(self, x, name: str = "x") -> np.ndarray:
        d, dtype = self.M.shape[1], getattr(x, "dtype", None)
        x = check_real_array(x, name, "Ensemble", finite=False, min_size=0, expected="an array of shape (S, n, d)")
        if x.ndim != 3 or x.shape[0] != self.n_systems or x.shape[2] != d or x.shape[1] < 1:
            raise InvalidParameterError(
                f"{name} of Ensemble must have shape (S, n, d) = ({self.n_systems}, n, {d}) with n >= 1; "
                f"got {x.shape}."
            )
        check_finite(x, name, "Ensemble")
        if self.geom.on_sphere:
            dev = float(np.max(np.abs(np.linalg.norm(x, axis=-1) - 1)))
            if dev > 1e-10:
                raise InvalidParameterError(
                    f"{name} must lie on the unit sphere (max |‖x_i‖ − 1| = {dev:.1e} > atol=1e-10); "
                    + unit_hint(name, dtype, dev)
                )
        return x

    @declare(keep=Instance((list, tuple, np.ndarray), what="a boolean mask or integer indices"))
    def subset(self, keep) -> Ensemble:
        """The ensemble of the systems selected by ``keep`` (a boolean mask or indices of the
        S systems), same heads, kind and geometry."""
        keep = np.asarray(keep)
        S = self.n_systems
        ok = keep.ndim == 1 and ((keep.dtype == bool and keep.size == S) or (
            np.issubdtype(keep.dtype, np.integer) and keep.size > 0 and -S <= keep.min() and keep.max() < S))
        if not ok:
            raise InvalidParameterError(
                f"keep of Ensemble.subset must be a boolean mask of shape ({S},) or non-empty integer indices in "
                f"[0, {S}); got {keep!r}."
            )
        return self._take(keep)

    def systems(self, idx):
        """The velocity of the systems ``idx`` alone, ``v(ts, xs)`` of their times (unused: the flow is
        autonomous) and tokens (len(idx), n, d): the field of a stepper that steps each system on
        its own (``"dopri5_systems"``)."""
        sub = self if len(idx) == self.n_systems else self._take(idx)
        return lambda ts, xs: sub._velocity(xs)

    def _take(self, idx) -> Ensemble:
        """:meth:`subset` without its checks (``idx`` valid indices or mask; the heads were checked
        once): the per-system steppers build one whenever their active set shrinks."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["beta"] = self.beta[idx]
        return new

    @declare(n=Integer(1))
    def exps_per_evaluation(self, n: int) -> int:
        """Exponentials one velocity evaluation computes per system of n tokens (0 for ReLU kinds): n² per head and
        exp of the kind, or per exp of the shared pass (heads whose E is a product of others' take none)."""
        n = check_param(n, "n", "Ensemble.exps_per_evaluation", low=1, integer=True)
        heads = self.M.shape[0] if self._shared is None else self._shared.n_exps
        return heads * n * n * self.attention.exps_per_pair

    def spectral_radius(self, t, x) -> float | None:
        r"""A bound on the spectral radius of the Jacobian of the (ambient) velocity at x, the
        largest over systems; None unless the heads are scalar (:math:`M_h = m_hI`,
        :math:`W_h = w_hI`), softmax or USA, on the sphere. Used by the ``"rkc"`` stepper.

        With :math:`F_i = \sum_h w_h\sum_j a^h_{ij}(x_j - \rho_{ij}x_i)`, :math:`\rho_{ij} =
        \langle x_i, x_j\rangle`, :math:`s_{ij} = \sqrt{1-\rho_{ij}^2} = |x_j - \rho_{ij}x_i|`,
        differentiating the weights (:math:`\partial a_{ij} = \beta m_h a_{ij}\,\partial\rho_{ij}`
        for USA, minus :math:`a_{ij}\partial\log Z_i` for softmax) bounds the 2-norm of each block
        :math:`\partial F_i/\partial x_k`; the largest block-row sum is an induced norm, so

        .. math:: \rho(J) \le \max_i \sum_h |w_h|\sum_j a^h_{ij}\,(3 + c\,\beta|m_h|\,s_{ij}),
                  \qquad c = 2\ (\text{USA}),\ 4\ (\text{softmax}).

        In a tight cluster :math:`s_{ij}\to 0` and the bound is 3/2 of the true rate for softmax
        (normal and tangent contraction :math:`2\sum_j a_{ij}` and :math:`\sum_j a_{ij}`) and 3x
        for USA, whose field depends on the directions only (class Notes: no normal
        contraction). Cost: one :math:`n^2` pass, as an evaluation.
        """
        rates = self._radii(x)
        return None if rates is None else float(rates.max())

    def consensus_rate(self) -> np.ndarray | None:
        r"""Per system, the rate r at which tokens near one point of the sphere contract to it
        (:func:`~particles._model.kinds.consensus_rate`: :math:`\sum_h w_h` for softmax,
        :math:`\sum_h w_h e^{\beta m_h}` for USA), for scalar heads :math:`M_h = m_hI`, :math:`W_h = w_hI`
        with :math:`m_h, w_h \ge 0` on the sphere; None otherwise. A fixed step dt with dt·r beyond its
        method's stability interval makes the numerical consensus repel (:func:`particles.simulate` warns)."""
        if not self.geom.on_sphere:
            return None
        return consensus_rate(self.attention, self._scalar_heads, self.beta)  # (S,): beta is one per system

    def _radii(self, x: np.ndarray) -> np.ndarray | None:
        if self._scalar_heads is None or not self.geom.on_sphere or x.shape[0] == 0:
            return None
        G = np.clip(x @ x.transpose(0, 2, 1), -1.0, 1.0)
        sin = np.sqrt(1.0 - G * G)
        rate = np.zeros(x.shape[:2])
        usa, n = self.attention.partition, x.shape[1]
        for m, w in self._scalar_heads:
            b = (self.beta * m)[:, None, None]
            with np.errstate(over="ignore"):
                # USA: e^{b rho}/n, overflowing only where the velocity itself overflows;
                # softmax: shifted by the row maximum, so never
                a = np.exp(b * G - np.log(n)) if usa else np.exp(b * G - np.max(b * G, axis=2, keepdims=True))
            if not usa:
                a /= a.sum(axis=2, keepdims=True)
            c = 2.0 if usa else 4.0
            rate += abs(w) * (3.0 * a.sum(axis=2) + c * np.abs(b[:, :, 0]) * np.einsum("sij,sij->si", a, sin))
        return rate.max(axis=1)

    @declare(x=_STATES)
    def velocity(self, x) -> np.ndarray:
        """Velocities of all systems, shape (S, n, d)."""
        return self._velocity(self.check_x(x))

    def __call__(self, t, x, out=None):
        return self._velocity(x, out=out)

    def _velocity(self, x: np.ndarray, weights=None, n=None, out=None) -> np.ndarray:
        """The velocity of x (into ``out`` if given); with ``weights`` (S, k) (scalar heads only),
        the field of tokens of the given masses among n (:class:`~particles._model.merging.Groups`)."""
        note_exact(self.M.shape[0])  # (a run's summation record, whichever field calls: an ensemble's sums are exact)
        out = np.empty_like(x) if out is None else out
        radial_free = self.attention.partition and self.geom.on_sphere
        for s0 in range(0, x.shape[0], self.chunk):
            sl = slice(s0, min(x.shape[0], s0 + self.chunk))
            xs = x[sl]
            if radial_free:  # the direction only (class Notes): no radial stiffness off the sphere
                norm = np.sqrt(np.einsum("snd,snd->sn", xs, xs))[..., None]
                xs = np.divide(xs, norm, out=WORK.get("unit", xs.shape))
            if self._scalar_heads is not None:  # tangent already on the sphere; flat: no projection
                self._scalar_velocity(xs, self.beta[sl], s0, out[sl], None if weights is None else weights[sl], n,
                                      unit=radial_free)
            else:
                out[sl] = self._chunk_velocity(xs, s0)
        return out

    def _chunk_velocity(self, xs: np.ndarray, s0: int) -> np.ndarray:
        """The generic pass: each head's batched sums (exact, shifted for exp kinds) and the
        kind's own batched pass, output rule and velocity scale (:class:`~particles._model.kinds.Kind`)."""
        n = xs.shape[1]
        kind = self.attention
        b = self.beta[s0:s0 + xs.shape[0]][:, None, None]
        v = np.zeros_like(xs)
        for h in range(self.M.shape[0]):
            m = scalar_of(self.M[h])
            # s_ij = (x_i^T M) x_j; a scalar head M = λI skips its GEMM
            left = (xs @ self.M[h]) * b if m is None else xs * (b * m)
            sums = kind.ensemble(left, xs)
            try:
                v += kind.output(sums, self.W[h].T, n, 0.0)
            except LogOverflow:  # name the system
                check_overflow(sums.logz.max(axis=-1), s0)
                raise
        return self.geom.project_tangent(xs, v * kind.scale(n))

    def _scalar_velocity(self, xs: np.ndarray, beta: np.ndarray, s0: int, dest: np.ndarray, weights=None,
                         n=None, unit: bool = False) -> None:
        """dest = Σ_h w_h f_h of scalar heads: softmax heads of one score direction through the shared pass of
        ensemble_shared, else (or where it declines) each through the fused pass of ensemble_kernels (the first
        head writes into dest, the others from a workspace buffer)."""
        if self._shared is not None and shared_heads(xs, beta, self._shared, WORK, tangent=self.geom.on_sphere,
                                                     weights=weights, unit=unit, out=dest) is not None:
            return
        n = xs.shape[1] if n is None else n
        usa_n = n if self.attention.partition else None
        for k, (m, w) in enumerate(self._scalar_heads):
            f = scalar_head(xs, beta * m, WORK, usa_n=usa_n, tangent=self.geom.on_sphere, weights=weights,
                            unit=unit, s0=s0, out=dest if k == 0 else None)
            if k == 0:
                if w != 1.0:
                    dest *= w
            elif w != 1.0:
                dest += w * f
            else:
                dest += f
