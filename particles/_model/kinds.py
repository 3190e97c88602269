r"""Attention kinds and update rules: how one head's sums become its output, and how the
head outputs become the velocity.

A kind is one object (:class:`Kind`): it carries its own passes (the exact pass of a model, the
batched pass of an :class:`~particles.Ensemble`), whether the summation layer's fast routes apply
(or a :class:`Refusal` naming the exact route), its mean-field rule (or a refusal naming the
particle route), its energy where it has one, its output rule, velocity scale and dense weights; its
parameters (a bias, an iteration count) are its dataclass fields. :func:`register_kind` enters it
once in :data:`ATTENTION_KINDS` and refuses a kind that lacks a piece, naming it. Nothing chooses
a pass by a name: every caller asks the kind. The four built-in kinds and the exponential family's
passes are in :mod:`~particles._model.kind_families`.

References: docs/theory.md §1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._core.errors import InvalidParameterError
from .._core.numerics import LOG_OVERFLOW
from .._core.params import Options

__all__ = ["Kind", "Refusal", "register_kind", "resolve_kind", "KindOption", "consensus_rate",
           "ATTENTION_KINDS", "KINDS", "MEAN_FIELD_KINDS", "LAGRANGIAN_KINDS", "UPDATES", "REQUIRED", "safe_exp"]


@dataclass(frozen=True)
class Refusal:
    """A piece a kind does not have: calling it raises :class:`InvalidParameterError` with ``reason``,
    which names the route to take instead."""

    reason: str

    def __call__(self, *args, **kwargs):
        raise InvalidParameterError(self.reason)


#: the pieces every kind must define (:func:`register_kind` refuses one lacking any, naming it);
#: ``fast`` and ``mean_field`` may be a :class:`Refusal`, ``energy`` is optional
REQUIRED = ("exact", "ensemble", "output", "scale", "dense", "fast", "mean_field")


@dataclass(frozen=True)
class Kind:
    r"""One attention kind; a subclass defines its pieces and declares its parameters as fields
    (their defaults are the kind's registered form).

    1. ``exact(model, x, sources, weights, transpose) -> list[HeadSums]``: every head's sums at the
       targets x (its exact pass; a kind of the exponential family goes through the summation layer,
       exact or fast by ``model.summation``). A kind whose pass takes weighted ``sources`` sets
       ``weighted = True`` (then the Lagrangian mean-field scheme runs it on weighted atoms);
    2. ``ensemble(left, xs) -> HeadSums``: the same sums of a stack of systems (``left`` (S, n, d) the
       scaled left factors :math:`\beta M^\top x_i`, ``xs`` (S, n, d)), for :class:`~particles.Ensemble`;
    3. ``output(p, Wt, n, c)``: the head output f_i (rows) from the sums ``p`` of one head, the
       transposed value matrix, the number of sources n and the log time scale c (it broadcasts over
       leading axes);
    4. ``scale(n)``: the factor of Σ_h f_i in the velocity;
    5. ``dense(s)``: the dense weights from the scaled scores β s (masked entries −inf);
    6. ``fast(M, beta, on_sphere)``: refuses summation='fast' where no head has a fast route, or a
       :class:`Refusal` (the kind has no fast summation);
    7. ``mean_field``: the rule of the grid mean-field schemes (finite volumes, JKO, spectral) and of
       the closed forms, ``"mean"`` (softmax, :math:`f_i = S_i/Z_i`) or ``"partition"`` (USA,
       :math:`f_i = e^{-c}Z_i\cdot S_i/Z_i`), or a :class:`Refusal` naming the particle (or
       Lagrangian) route;
    8. ``energy(model, x)`` (optional): the energy whose gradient flow the kind is for symmetric
       :math:`M_h`, or a :class:`Refusal`;
    8b. ``zonal_kernel(a)`` (optional, a kind of unnormalised weights that refuses the grid rules): the
       weight g, the potential G (:math:`G' = g`) and the energy kernel F of one scalar head of
       :math:`a = \beta\lambda_h` on a measure, ``(g, G, F)`` callables of :math:`t = \langle x, y\rangle`,
       such that the head's velocity is :math:`\mu_h\int g(\langle x, y\rangle)P_xy\,d\mu(y) =
       \mu_h\nabla_S\int G(\langle x, y\rangle)\,d\mu(y)` and the mean-field energy
       :math:`\frac1\beta\sum_h\iint F_h\,d\mu\,d\mu`; the spectral scheme takes their Funk–Hecke
       coefficients by quadrature. A :class:`Refusal` (the default) where the kind has none;
    9. ``beta_free``: its weights do not depend on β > 0 (row-normalised ReLU), so its pass runs on
       the unscaled scores; ``exps_per_pair``: exponentials per (i, j) pair and head of one pass;
    10. ``consensus_sum(a, c)`` (optional, None by default): a head's total weight with every token at one
        point, which sets the rate of :func:`consensus_rate` that :func:`particles.simulate` checks a fixed
        step against.
    """

    name: str = ""
    weighted = False
    beta_free = False
    exps_per_pair = 1
    energy = Refusal("this kind has no energy of which it is the gradient flow")
    zonal_kernel = Refusal("this kind has no zonal kernel for the spectral mean-field scheme; use "
                           "scheme='lagrangian' (weighted atoms) where its pass takes weighted sources.")

    @property
    def normalised(self) -> bool:
        """The output is the attention mean :math:`S_i/Z_i` (mean-field rule "mean"): the mean-field
        velocity divides each head's sum by its partition function."""
        return self.mean_field == "mean"

    @property
    def partition(self) -> bool:
        """The output is USA's partition-scaled mean (mean-field rule "partition")."""
        return self.mean_field == "partition"

    @property
    def exp_rule(self) -> str | None:
        """The mean-field rule, or None for a kind that refuses the grid schemes."""
        return self.mean_field if isinstance(self.mean_field, str) else None

    @property
    def has_fast(self) -> bool:
        """The summation layer's fast routes apply to it (its ``fast`` is no :class:`Refusal`)."""
        return not isinstance(self.fast, Refusal)

    @property
    def has_energy(self) -> bool:
        """It states an energy (its ``energy`` is no :class:`Refusal`)."""
        return not isinstance(self.energy, Refusal)

    @property
    def has_zonal_kernel(self) -> bool:
        """It states a zonal kernel for the spectral scheme (its ``zonal_kernel`` is no :class:`Refusal`)."""
        return not isinstance(type(self).zonal_kernel, Refusal)

    @property
    def shares_energy_sums(self) -> bool:
        """Its attention sums are the exponential sums that define the energies (E_h, entropies)."""
        return False

    def consensus_sum(self, a: np.ndarray, c: float) -> np.ndarray | None:
        r"""The weight a head gives all its sources when every token sits at one point, the velocity's factor
        included: :math:`\text{scale}(n)\sum_j a_{ij}` at :math:`\rho_{ij} = 1`, for scaled scores
        :math:`a = \beta m` (an array) and the log time scale c; None where the kind states none. Its
        weighted sum over the heads is the rate of :func:`consensus_rate`."""
        return None

    def time_shift(self, log_time_scale: float) -> float:
        """The c of the factor :math:`e^{-c}` the output carries: the model's log time scale for the
        partition-scaled rule (USA), 0 for every other kind (their time is not rescaled)."""
        return log_time_scale if self.partition else 0.0

    def parameters(self) -> dict:
        """The kind's parameters that differ from their defaults (``{}``: the registered form)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "name" and getattr(self, f.name) != f.default}


def safe_exp(a) -> np.ndarray:
    """exp that returns +inf past the float64 range instead of warning."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.inf)
    ok = a < LOG_OVERFLOW + 9.0
    out[ok] = np.exp(a[ok])
    return out


class LogOverflow(ArithmeticError):
    """An output rule's log-weight passed :data:`LOG_OVERFLOW` (args: that log-weight);
    the model turns it into a :class:`SolverError` that names the head and the fix."""


class _Names(Sequence):
    """The names of the registered kinds that pass ``test``, read from the registry at each use (a
    live tuple: a kind registered later is in it)."""

    def __init__(self, test):
        self._test = test

    def _names(self) -> tuple:
        return tuple(name for name, kind in ATTENTION_KINDS.items() if self._test(kind))

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and self._names() == tuple(other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._names())


#: every attention kind by name, its registered (default) form (module docstring); :func:`register_kind` adds
ATTENTION_KINDS: dict[str, Kind] = {}
#: the same registry under its public name (``particles.KINDS``): name -> kind
KINDS = ATTENTION_KINDS
#: the kinds with a grid mean-field rule (USA, softmax): those the grid mean-field solvers, the closed forms,
#: the studies and the fused ensemble pass implement
MEAN_FIELD_KINDS = _Names(lambda kind: kind.exp_rule is not None)
#: the kinds whose exact pass takes weighted sources: the Lagrangian mean-field scheme and measure_velocity
LAGRANGIAN_KINDS = _Names(lambda kind: kind.weighted)


def _defines(kind: Kind, piece: str) -> bool:
    return getattr(type(kind), piece, None) is not None or piece in vars(kind)


def register_kind(kind: Kind) -> Kind:
    """Enter ``kind`` (its registered form, the defaults of its parameters) in :data:`ATTENTION_KINDS`
    under ``kind.name``, once; refuse one that lacks a piece of :data:`REQUIRED`, naming it, or whose
    name is taken. Returns the kind.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class NoPass(Kind):
    ...     name: str = "no_pass"
    >>> register_kind(NoPass())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    particles.validation.InvalidParameterError: kind 'no_pass' lacks exact, ensemble, output, scale, dense, ...
    """
    if not isinstance(kind, Kind) or not kind.name:
        raise InvalidParameterError(f"register_kind needs a named particles.extend.Kind instance; got {kind!r}.")
    missing = [piece for piece in REQUIRED if not _defines(kind, piece)]
    if missing:
        raise InvalidParameterError(f"kind {kind.name!r} lacks {', '.join(missing)}: define each (a Refusal naming "
                                    "the other route where fast or mean_field does not apply).")
    if kind.name in ATTENTION_KINDS:
        raise InvalidParameterError(f"kind {kind.name!r} is registered already ({ATTENTION_KINDS[kind.name]!r}).")
    ATTENTION_KINDS[kind.name] = kind
    return kind


def resolve_kind(kind) -> Kind:
    """The kind object of a model's ``kind`` field: a registered name, or a kind with parameters."""
    return ATTENTION_KINDS[kind] if isinstance(kind, str) else kind


def canonical_kind(kind):
    """A kind as a model stores it: its name when its parameters are the registered defaults (so that
    records and cell keys of such a model are those of the name), else the kind object."""
    return kind.name if isinstance(kind, Kind) and kind == ATTENTION_KINDS.get(kind.name) else kind


def kind_to_attrs(kind) -> dict:
    """A kind as netCDF-safe attrs: ``kind`` its name, and ``kind_<p>`` for each parameter that differs from
    its default (none for a registered name, so its records are those of earlier versions)."""
    out = {"kind": resolve_kind(kind).name}
    for name, value in resolve_kind(kind).parameters().items():
        out[f"kind_{name}"] = "none" if value is None else value
    return out


def kind_from_attrs(attrs):
    """``attrs`` with the kind of :func:`kind_to_attrs` rebuilt (a kind object when it records parameters)."""
    params = {key[5:]: value for key, value in attrs.items() if key.startswith("kind_")}
    if not params or attrs.get("kind") not in ATTENTION_KINDS:
        return attrs
    values = {k: None if isinstance(v, str) and v == "none" else v.item() if isinstance(v, np.generic) else v
              for k, v in params.items()}
    try:
        kind = dataclasses.replace(ATTENTION_KINDS[attrs["kind"]], **values)
    except TypeError as exc:
        raise InvalidParameterError(f"the attrs record parameters the kind {attrs['kind']!r} lacks: {exc}") from None
    return {**{k: v for k, v in attrs.items() if not k.startswith("kind_")}, "kind": kind}


class KindOption(Options):
    """A registered kind's name, or an instance of a registered kind's class (a kind with parameters);
    the names are read from the registry at each check, so a kind registered later is accepted."""

    def __init__(self, hint: str = ""):
        self.hint = hint

    @property
    def choices(self) -> tuple:
        return tuple(ATTENTION_KINDS)

    def accepts(self, value, strict: bool = False) -> bool:
        if isinstance(value, Kind):
            return type(ATTENTION_KINDS.get(value.name)) is type(value)
        return super().accepts(value, strict)


#: update rule -> the geometry it needs (None: either). v_i = scale · Σ_h f_i^h, then
#: "standard": P_{x_i} v_i (sphere) or v_i (flat);
#: "pre_ln" (flat): v_i computed from the normalised tokens x_j/‖x_j‖ (pre-LN residual stream);
#: "post_ln" (sphere): v_i unprojected, so that Euler with the retraction is the post-LN layer
#: x ← (x + dt v)/‖x + dt v‖, whose dt → 0 limit is the sphere flow;
#: "ngpt" (sphere): P_{x_i}(v_i/‖v_i‖), the continuous nGPT update (normalised step direction).
UPDATES = {"standard": None, "pre_ln": "flat", "post_ln": "sphere", "ngpt": "sphere"}


def consensus_rate(kind: Kind, heads, beta, c: float = 0.0):
    r"""The rate r at which tokens near one point of the sphere contract to it under scalar heads
    ``heads`` = ((m_h, w_h), ...) (:math:`M_h = m_hI`, :math:`W_h = w_hI`, all :math:`m_h, w_h \ge 0`) of
    ``kind`` at ``beta`` (a number or an array of them), or None (another head, or a kind that states no
    :meth:`Kind.consensus_sum`).

    Linearised at consensus (tokens :math:`c + \varepsilon_i` with :math:`\varepsilon_i \perp c`), every weight
    is the same and its own derivative multiplies :math:`x_j - \rho_{ij}x_i`, itself first order, so
    :math:`\dot\varepsilon_i = r(\bar\varepsilon - \varepsilon_i)`,

    .. math:: r = \sum_h w_h\,\mathrm{scale}(n)\sum_j a^h_{ij}\Big|_{\rho = 1}
              = \sum_h w_h\ \text{(softmax)},\qquad \sum_h w_h e^{\beta m_h - c}\ \text{(USA)}.

    A fixed step dt with dt·r beyond its method's stability interval makes the numerical consensus repel
    (:func:`particles.simulate` warns with :class:`~particles.validation.StabilityWarning`)."""
    if heads is None or any(m is None or w is None or m < 0 or w < 0 for m, w in heads):
        return None
    beta = np.asarray(beta, dtype=float)
    sums = [kind.consensus_sum(beta * m, c) for m, _ in heads]
    if any(s is None for s in sums):
        return None
    return sum(w * s for (_, w), s in zip(heads, sums))


def apply_update(update: str, geom, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The velocity of update rule ``update`` from the summed head outputs v (:data:`UPDATES`)."""
    if update in ("pre_ln", "post_ln"):
        return v
    if update == "ngpt":
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        v = np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)
    return geom.project_tangent(x, v)


def check_fast(M: np.ndarray, beta: float, kind, on_sphere: bool) -> None:
    """Refuse summation='fast' up front where no head can take a fast route (the kind's ``fast``)."""
    resolve_kind(kind).fast(M, beta, on_sphere)


def usa_overflow_message(h: int, top: float, beta: float, x: np.ndarray) -> str:
    """Why a USA head overflowed: the log-weight itself (never its exponential), and whether
    the state had left the sphere (a Runge–Kutta stage pushed off by a huge velocity)."""
    msg = (f"USA head {h} overflows float64 at beta={beta:g}: the log of its largest row weight is "
           f"{top:.4g} > {LOG_OVERFLOW:g}")
    R = float(np.sqrt(np.max(np.einsum("ij,ij->i", x, x))))
    if R > 1.0 + 1e-6:
        msg += (f", evaluated at a Runge–Kutta stage state that left the sphere (max ‖x_i‖ = {R:.3g}): "
                "the velocity, of order exp(beta ‖M‖)/n, is far too large for this dt")
    return msg + ". Build the model with log_time_scale='auto' to integrate in rescaled time."
