r"""Phase diagrams: how much clustering S random systems show after a time t, over a grid of models.

:func:`phase_diagram` integrates ``n_systems`` independent systems of n tokens per grid point (all systems of a
cell in one batched field) and records at every save time the mean over systems, with its standard error, of
``clustered_pairs`` (pairs with :math:`\langle x_i, x_j\rangle \ge \rho_c`) and ``n_clusters`` (ε-connected
components), next to the equiangular theory of docs/theory.md §4 where it applies (``theory_time``, the time
from ρ = 0 to ρ_c). A grid point's model is one head :math:`M = W = I_d` at that β (the β-values form), the
given :class:`particles.MultiHead` with the point's values put in, or a function's model of the point
(:mod:`~metrics._studies.phase_grid`). Cells are :func:`metrics.run_sweep` cells (the β values of one model ×
chunk index): a chunk's initial tokens depend on its index only (common random numbers across the grid). Its
settings are one table, :class:`PhaseSettings`.
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass, replace

import numpy as np
import xarray as xr

from particles import KINDS, STEPPERS, Ensemble, InvalidParameterError, MultiHead, SaveAt, simulate, theory
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import NONE, AnyOf, Boolean, Integer, Interval, Options, Relation, SequenceOf

from .._observables.pairs import cluster_counts, gram, pair_fraction, span_systems
from .._runs import params as P
from .._runs.cells import saved_to_dataset
from .._runs.keys import exact_arccos
from . import phase_grid as pg
from .phase_grid import PHASE_STATISTICS
from .spec import Study, StudySettings, setting, study_function

__all__ = ["phase_diagram", "PHASE_STATISTICS", "PhaseSettings"]

#: statistic name -> its values per system of a stack x with Gram matrices G
_STATISTIC_FNS = {"clustered_pairs": lambda x, G, s: pair_fraction(x, s.rho_c, G),
                  "n_clusters": lambda x, G, s: cluster_counts(x, s.eps, G)}
_INITS = ("uniform", "equiangular")


def _phase_cell(params: dict, seed_index: int, s: PhaseSettings, entropy: int) -> xr.Dataset:
    """One chunk of systems at one β (run_sweep's cell contract; dims: time), integrated in one
    :func:`particles.simulate` call whose save function records the statistics at each save time
    (an adaptive step carries over from one save interval to the next); with ``drop_settled`` the
    field is :meth:`particles.Ensemble.settling` where its certificate holds, so a system certified settled
    stops at the step it is certified (its statistics are 1 from then on, as the full integration's)."""
    start, stop = s.chunks[seed_index]
    c, beta, heads = stop - start, float(params["beta"]), s.heads
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_index,)))
    ts = s.ts
    if heads is None:  # one head M = W = I, in the coordinates of the tokens' span for d > n (span_systems)
        x = span_systems(c, s.n, s.d, s.init, rng)
        field_ = Ensemble(np.eye(x.shape[2]), beta=np.full(c, beta), kind=s.kind, chunk=_BATCH)
    else:  # span or full coordinates, an Ensemble or the model's own field (phase_grid)
        x = pg.systems(c, s.n, heads, s.init, rng)
        field_ = pg.cell_field(heads, beta, c, x.shape[2], _BATCH)
    if s.drop_settled and isinstance(field_, Ensemble):
        # a cap of diameter below both thresholds (less a margin for round-off at its edge)
        try:
            field_ = field_.settling(min(exact_arccos(s.rho_c), s.eps) * (1 - 1e-6), merge=s.merge)
        except InvalidParameterError:  # no certificate for these heads (W_h not mu_h I, mu_h >= 0): run all
            if s.merge:
                raise
    unit = heads is not None and not heads.geom.on_sphere  # the statistics of the tokens' directions

    def save_fn(t, x):
        if unit:
            x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        G, row = gram(x), {}  # one Gram matrix per system for every statistic
        for name in s.statistic:
            v = _STATISTIC_FNS[name](x, G, s)
            row[f"{name}_sum"], row[f"{name}_sumsq"] = v.sum(), np.square(v).sum()
        return row

    traj = simulate(x, field_, t0=float(ts[0]), t1=float(ts[-1]), dt=s.dt, method=s.method, progress=False,
                    save=SaveAt(ts=ts, x=False, fn=save_fn), on_failure="return", rtol=s.rtol, atol=s.rtol * 1e-2)
    ds = saved_to_dataset(traj, ts)
    ds["count"] = ((), float(c))
    ds.attrs["failure_message"] = "" if traj.success else traj.message
    return ds


class _PhaseModel:
    """model_fn for run_sweep's provenance probe (picklable), which reads its summation mode only: a head in
    two coordinates with the exact sums of the Ensemble cells (an identity of size d would take 8 d² bytes,
    32 GiB at d = 65536)."""

    def __init__(self):
        self.__qualname__ = "phase_diagram.model"

    def __call__(self, params, rng):
        return MultiHead(np.eye(2), beta=float(params["beta"]), summation="exact")


#: systems per batched field evaluation inside a cell (Ensemble's chunk)
_BATCH = 256


@dataclass(frozen=True)
class PhaseSettings(StudySettings):
    """The phase diagram's settings, one table: each field's rule, default and name in the cells' key
    (the public function's parameters derive from it); ``heads`` is derived (a grid point's model)."""

    model: object = setting(pg.MODEL_RULE, cells=False)
    grid: dict | None = setting(AnyOf(NONE, pg.GRID_RULE), None)
    _: KW_ONLY
    n: int = setting(Integer(2), 32, key=True)
    d: int | None = setting(AnyOf(NONE, Integer(2)), None, key=True)
    kind: str | None = setting(AnyOf(NONE, Options(*KINDS)), None, key=True)
    t1: float = setting(P.T1, 30.0)
    n_systems: int = setting(Integer(2), 256)
    chunk: int = setting(Integer(1), 256)
    n_saves: int = setting(P.N_SAVES, 31)
    statistic: tuple = setting(AnyOf(Options(*PHASE_STATISTICS), SequenceOf(Options(*PHASE_STATISTICS), min_len=1)),
                               ("clustered_pairs", "n_clusters"), key="statistics")
    rho_c: float = setting(Interval(0, 1, closed="neither"), 0.999, key=True)
    eps: float | None = setting(AnyOf(NONE, Interval(0, np.pi, closed="right")), None, key=True)
    init: str = setting(Options(*_INITS), "uniform", key=True)
    method: str = setting(Options(*(m for m in STEPPERS if m != "euler_maruyama")), "rk4")
    dt: float = setting(P.DT, 0.1)
    rtol: float = setting(P.POSITIVE, 1e-6, key=True)
    drop_settled: bool = setting(Boolean(), True, key=True)
    merge: float = setting(Interval(0, 0.1), 0.0, key=True, since=True)
    seed: int | None = setting(AnyOf(NONE, P.SEED), 0)
    heads: MultiHead | None = None

    RELATIONS = (P.STEPS_WITHIN_METHOD,
        Relation(("model",), lambda b: not pg.is_values(b) or len(np.unique(b)) == len(b), "must be distinct",
                 breaks={"model": [1.0, 1.0]}),
        Relation(("grid", "model"), lambda g, m: (g is None) == pg.is_values(m),
                 "goes with a model (a MultiHead or a function of the grid point); β values take none",
                 breaks={"grid": {"beta": [1.0]}, "model": [1.0]}),
        Relation(("d", "kind", "model"), lambda d, k, m: pg.is_values(m) or (d is None and k is None),
                 "come from the model: give them only with β values (one head M = W = I_d)",
                 breaks={"d": 3, "kind": None, "model": MultiHead(np.eye(2)), "grid": {"beta": [1.0]}}),
        Relation(("kind", "model"), lambda k, m: not pg.is_values(m) or k in (None, *MEAN_FIELD_KINDS),
                 f"of the β-values form must be one of {list(MEAN_FIELD_KINDS)}: pass MultiHead(np.eye(d), kind=...) "
                 "and grid={'beta': [...]} for the others", breaks={"kind": "relu", "model": [1.0]}),
        Relation(("init", "d", "n"), lambda init, d, n: init != "equiangular" or d is None or d >= n,
                 "init='equiangular' needs d >= n (n orthonormal tokens): use init='uniform' or a larger d",
                 breaks={"init": "equiangular", "n": 4, "d": 2}),
        Relation(("merge", "drop_settled"), lambda merge, drop: not merge or drop,
                 "merge works in the settling field: pass drop_settled=True, or merge=0",
                 breaks={"merge": 0.01, "drop_settled": False}),
    )

    @property
    def chunks(self) -> list:
        """(first, stop) systems of each chunk."""
        edges = list(range(0, self.n_systems, self.chunk)) + [self.n_systems]
        return [(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _phase_key(s: PhaseSettings) -> dict:
    """Key format 1 of a phase-diagram cell: the settings of its systems, the chunks and the field's batch
    among them, ``merge`` only when it is not 0 (the exact flow's cells predate the option), and a model's
    heads without β (:func:`~metrics._studies.phase_grid.heads_key`) when they are not the one head M = W = I."""
    heads = {} if s.heads is None else {"head_fields": pg.heads_key(s.heads)}
    return {**s.key(), "chunks": s.chunks, "batch": _BATCH, **heads}


PHASE = Study(name="phase_diagram", kind="phase", label="phase diagram", cell=_phase_cell, key=_phase_key)


@study_function(PhaseSettings)
def phase_diagram(s: PhaseSettings, **run) -> xr.Dataset:
    r"""Clustering statistics of ``n_systems`` random systems per grid point, at every save time.

    ``phase_diagram(betas, n=, d=, kind=)``: one head :math:`M = W = I_d` of ``kind`` ("softmax", "usa") at each
    β. ``phase_diagram(model, grid, n=)``: the :class:`particles.MultiHead` ``model`` (any heads, kinds, causal
    masks and updates) with each grid point's values put in (axes ``beta``, ``lambda_<h>``, ``spread``, ``d``,
    and ``n`` the tokens per system: :data:`~metrics._studies.phase_grid.MODEL_AXES`), or ``model(point)`` for a
    function of the grid point (a dict of its values; any axis names). Scalar heads run in the
    min(d, n) coordinates of the tokens' span, other heads in all d. For each statistic :math:`X`
    (``clustered_pairs``: fraction of pairs with :math:`\langle x_i,x_j\rangle\ge\rho_c`; ``n_clusters``:
    ε-connected components) the dataset holds the mean over systems and its standard error
    :math:`\sqrt{s^2/S}`, and ``theory_time``, the equiangular time :math:`t^* = \int_0^{\rho_c} d\rho/\dot\rho`
    of docs/theory.md §4 where it applies (aligned scalar heads :math:`M_h = W_h = \lambda_h I`, softmax or USA,
    the standard flow; absent when no grid point has one).

    Parameters
    ----------
    model : β values >= 0 (distinct), a particles.MultiHead, or a function ``point -> MultiHead``
    grid : dict of axis name -> distinct values, with a model (its points are the product of the axes)
    n : tokens per system; d, kind : ambient dimension (default 2) and {"softmax", "usa"} of the β-values form
    t1, n_saves : final time T; statistics at ``n_saves`` equally spaced times in [0, T]
    n_systems, chunk : systems per grid point (>= 2, for a standard error); systems per cell (one batched
        run, one stored file)
    statistic : names of :data:`PHASE_STATISTICS` (one or a sequence)
    rho_c, eps : clustered-pair threshold; cluster-count distance in radians (default :math:`\arccos\rho_c`)
    init : {"uniform", "equiangular"}: i.i.d. uniform tokens, or orthonormal ones (ρ = 0, d >= n) rotated
    method, dt, rtol
        Stepper of :data:`particles.STEPPERS` with its step (fixed-step methods), or its first step and
        relative tolerance (adaptive; absolute tolerance ``rtol/100``); ``"dopri5_systems"``: a step per system.
    drop_settled : bool
        Stop integrating the systems certified to lie in a cap of radius :math:`\min(\arccos\rho_c,
        \varepsilon)/2` (:meth:`particles.Ensemble.settling`; value matrices :math:`W_h = \mu_h I`,
        :math:`\mu_h \ge 0`, on the sphere): the cap is forward invariant, so the results are the full
        integration's. Other heads are integrated to T.
    merge : float
        ``merge = δ > 0`` (with ``drop_settled``, scalar heads): tokens of a system closer than δ (chordal) join
        for good (``Ensemble.settling(..., merge=δ)``); positions move by O(δ).
    seed : root entropy or None; chunk k draws from ``SeedSequence(entropy, spawn_key=(k,))``
    engine, max_workers, store, progress : as in :func:`metrics.run_sweep` (one file per (point, chunk))

    Returns
    -------
    xr.Dataset
        Dims: the grid's axes (``beta`` for β values), ``time`` (and ``chunk`` for ``success``); variables
        ``<statistic>``, ``<statistic>_se``, ``theory_time`` (where it applies), ``success``; the run
        parameters and provenance in attrs.

    Examples
    --------
    >>> ds = phase_diagram([0.0, 1.0], n=4, d=3, t1=2.0, n_systems=4, n_saves=3, dt=0.5)
    >>> ds.clustered_pairs.dims, float(ds.clustered_pairs.isel(time=0).max())
    (('beta', 'time'), 0.0)
    >>> heads = MultiHead.scalar([0.5, 1.0, 2.0], d=4, beta=1.0, kind="softmax")
    >>> phase_diagram(heads, {"spread": [0.0, 1.0]}, n=4, t1=2.0, n_systems=4, n_saves=3, dt=0.5).n_clusters.dims
    ('spread', 'time')
    """
    statistic = (s.statistic,) if isinstance(s.statistic, str) else tuple(s.statistic)
    # the correctly rounded arccos: a derived setting that enters the cell key must be one double everywhere
    s = replace(s, statistic=statistic, eps=exact_arccos(s.rho_c) if s.eps is None else s.eps,
                chunk=min(s.chunk, s.n_systems))
    if pg.is_values(s.model):  # one head M = W = I_d: the cells of today's stores
        s = pg.values_form(s)
        axes = {"beta": list(s.model)}
        sweep = PHASE.cells(axes, len(s.chunks), s, _PhaseModel(), **run)
        where = [(sweep, i) for i in range(len(s.model))]
        times = [theory.hitting_time(0.0, s.rho_c, lambdas=[1.0], beta=float(b), n=s.n, kind=s.kind) for b in s.model]
        return pg.summarise(axes, where, times, s, PHASE.kind)
    axes, groups, where, times = dict(s.grid), {}, [], []
    for point in pg.grid_points(axes):
        heads, n = pg.point_model(s.model, point), pg.point_tokens(point, s.n)
        pg.check_point(point, heads, n, s.init, s.merge)
        group = groups.setdefault((json.dumps(pg.heads_key(heads), sort_keys=True), n), (heads, n, []))
        group[2].extend([] if heads.beta in group[2] else [heads.beta])
        where.append((group, group[2].index(heads.beta)))
        times.append(pg.equiangular_time(heads, n, s.rho_c))
    sweeps = {id(g): PHASE.cells({"beta": g[2]}, len(s.chunks), replace(s, n=g[1], heads=g[0]), _PhaseModel(),
                                 **run) for g in groups.values()}
    return pg.summarise(axes, [(sweeps[id(g)], i) for g, i in where], times, s, PHASE.kind)
