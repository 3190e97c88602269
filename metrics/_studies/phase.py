r"""Phase diagrams: how much clustering S random systems show after a time t, against β.

:func:`phase_diagram` integrates ``n_systems`` independent systems of n tokens on :math:`S^{d-1}` per
inverse temperature β (heads :math:`M = W = I_d`, all systems of a cell in one batched
:class:`particles.Ensemble`) and records at every save time the mean over systems, with its standard
error, of ``clustered_pairs`` (pairs with :math:`\langle x_i, x_j\rangle \ge \rho_c`) and ``n_clusters``
(ε-connected components), next to the equiangular theory of docs/theory.md §4 (``theory_time[β]``, the
time from ρ = 0 to ρ_c). Cells are :func:`metrics.run_sweep` cells (grid ``beta`` × chunk index): a
chunk's initial tokens depend on its index only (common random numbers across β). Its settings are one
table, :class:`PhaseSettings`.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, replace

import numpy as np
import xarray as xr

from particles import STEPPERS, Ensemble, MultiHead, SaveAt, simulate, theory
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import NONE, AnyOf, Boolean, Integer, Interval, Options, Relation, SequenceOf

from .._data.dataset import KIND_ATTR, time_coord
from .._data.provenance import netcdf_safe, provenance
from .._observables.pairs import cluster_counts, gram, pair_fraction, span_systems
from .._runs import params as P
from .._runs.cells import saved_to_dataset
from .._runs.keys import exact_arccos
from .spec import Study, StudySettings, setting, study_function

__all__ = ["phase_diagram", "PHASE_STATISTICS", "PhaseSettings"]

#: statistic name -> (long name, units)
PHASE_STATISTICS = {
    "clustered_pairs": ("fraction of token pairs with <x_i, x_j> >= rho_c", "1"),
    "n_clusters": ("number of eps-connected clusters", "1"),
}
#: statistic name -> its values per system of a stack x with Gram matrices G
_STATISTIC_FNS = {"clustered_pairs": lambda x, G, s: pair_fraction(x, s.rho_c, G),
                  "n_clusters": lambda x, G, s: cluster_counts(x, s.eps, G)}
_INITS = ("uniform", "equiangular")


def _phase_cell(params: dict, seed_index: int, s: PhaseSettings, entropy: int) -> xr.Dataset:
    """One chunk of systems at one β (run_sweep's cell contract; dims: time), integrated in one
    :func:`particles.simulate` call whose save function records the statistics at each save time
    (an adaptive step carries over from one save interval to the next); with ``drop_settled`` the
    field is :meth:`particles.Ensemble.settling`, so a system certified settled stops at the step
    it is certified (its statistics are 1 from then on, as the full integration's)."""
    start, stop = s.chunks[seed_index]
    c = stop - start
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_index,)))
    x = span_systems(c, s.n, s.d, s.init, rng)
    ts = s.ts
    # x is in the coordinates of the tokens' span for d > n (span_systems): the field acts there
    field_ = Ensemble(np.eye(x.shape[2]), beta=np.full(c, float(params["beta"])), kind=s.kind, chunk=_BATCH)
    if s.drop_settled:
        # a cap of diameter below both thresholds (less a margin for round-off at its edge)
        field_ = field_.settling(min(exact_arccos(s.rho_c), s.eps) * (1 - 1e-6), merge=s.merge)

    def save_fn(t, x):
        G, row = gram(x), {}  # one Gram matrix per system for every statistic
        for name in s.statistic:
            v = _STATISTIC_FNS[name](x, G, s)
            row[f"{name}_sum"], row[f"{name}_sumsq"] = v.sum(), np.square(v).sum()
        return row

    traj = simulate(x, field_, t0=float(ts[0]), t1=float(ts[-1]), dt=s.dt, method=s.method,
                    save=SaveAt(ts=ts, x=False, fn=save_fn), on_failure="return", rtol=s.rtol, atol=s.rtol * 1e-2)
    ds = saved_to_dataset(traj, ts)
    ds["count"] = ((), float(c))
    ds.attrs["failure_message"] = "" if traj.success else traj.message
    return ds


class _PhaseModel:
    """model_fn for run_sweep's provenance probe (picklable): the heads of the diagram in the coordinates the
    cells run in, min(d, n) (provenance reads their summation mode only; an identity of size d would take
    8 d² bytes, 32 GiB at d = 65536)."""

    def __init__(self, settings: PhaseSettings):
        self.settings = settings
        self.__qualname__ = "phase_diagram.model"

    def __call__(self, params, rng):
        s = self.settings
        return MultiHead(np.eye(min(s.d, s.n)), beta=float(params["beta"]), kind=s.kind, summation="exact")


#: systems per batched field evaluation inside a cell (Ensemble's chunk)
_BATCH = 256


@dataclass(frozen=True)
class PhaseSettings(StudySettings):
    """The phase diagram's settings, one table: each field's rule, default and name in the cells' key
    (the public function's parameters derive from it)."""

    betas: list = setting(SequenceOf(Interval(0), hint="Use e.g. np.linspace(0.1, 9, 90)."))
    _: KW_ONLY
    n: int = setting(Integer(2), 32, key=True)
    d: int = setting(Integer(2), 2, key=True)
    kind: str = setting(Options(*MEAN_FIELD_KINDS), "softmax", key=True)
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

    RELATIONS = (P.STEPS_WITHIN_METHOD,
        Relation(("betas",), lambda b: len(np.unique(b)) == len(b), "must be distinct", breaks={"betas": [1.0, 1.0]}),
        Relation(("init", "d", "n"), lambda init, d, n: init != "equiangular" or d >= n,
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
    among them, and ``merge`` only when it is not 0 (the exact flow's cells predate the option)."""
    return {**s.key(), "chunks": s.chunks, "batch": _BATCH}


PHASE = Study(name="phase_diagram", kind="phase", label="phase diagram", cell=_phase_cell, key=_phase_key)


@study_function(PhaseSettings)
def phase_diagram(s: PhaseSettings, **run) -> xr.Dataset:
    r"""Clustering statistics of ``n_systems`` random systems per β, at every save time.

    Each system is n tokens on :math:`S^{d-1}` under one head :math:`M = W = I_d` of ``kind``
    (simulated in min(d, n) coordinates: the span of the tokens is invariant, see
    ``metrics._observables.pairs.span_systems``):
    softmax :math:`\dot x_i = P_{x_i}\sum_j \frac{e^{\beta\langle x_i,x_j\rangle}}{Z_i} x_j`
    or USA :math:`\dot x_i = P_{x_i}\frac1n\sum_j e^{\beta\langle x_i,x_j\rangle} x_j`.
    For each statistic :math:`X` (``clustered_pairs``: fraction of pairs with
    :math:`\langle x_i,x_j\rangle\ge\rho_c`; ``n_clusters``: ε-connected components) the
    dataset holds the mean :math:`\bar X(\beta,t)` over systems and its standard error
    :math:`\sqrt{s^2/S}` (:math:`s^2` the unbiased variance over the S systems), and the
    equiangular theory time :math:`t^*(\beta) = \int_0^{\rho_c} d\rho/\dot\rho` of
    docs/theory.md §4 (at β = 0, softmax: :math:`\ln\frac{1+(n-1)\rho_c}{1-\rho_c}/2`).

    Parameters
    ----------
    betas : distinct inverse temperatures >= 0, shape (B,)
    n, d, kind : tokens per system, ambient dimension, {"softmax", "usa"}
    t1, n_saves : final time T; statistics at ``n_saves`` equally spaced times in [0, T]
    n_systems, chunk : systems per β (>= 2, for a standard error); systems per cell (one batched
        :class:`particles.Ensemble` run, one stored file)
    statistic : names of :data:`PHASE_STATISTICS` (one or a sequence)
    rho_c, eps : clustered-pair threshold; cluster-count distance in radians (default
        :math:`\arccos\rho_c`, the angle of a clustered pair)
    init : {"uniform", "equiangular"}: i.i.d. uniform tokens, or orthonormal ones (ρ = 0, d >= n) rotated
    method, dt, rtol
        Stepper of :data:`particles.STEPPERS` with its step (fixed-step methods), or its
        first step and relative tolerance (``"dopri5"``, ``"rkc"``; absolute tolerance ``rtol/100``).
        ``"dopri5_systems"`` gives every system of a chunk its own adaptive step (a shared step
        moves at the pace of the system in the fastest transient: large-β USA diagrams).
    drop_settled : bool
        Stop integrating the systems certified to lie in a cap of radius
        :math:`\min(\arccos\rho_c, \varepsilon)/2` (:meth:`particles.Ensemble.settling`): such a cap
        is forward invariant, so their statistics stay 1; the results are the full integration's.
    merge : float
        0 (default): the exact flow. ``merge = δ`` (with ``drop_settled``): tokens of a system closer
        than δ (chordal) join for good and move as one token of their mass (``Ensemble.settling(...,
        merge=δ)``), so a clustered USA system at large β stops paying for its stiff clusters;
        positions move by O(δ) (δ = 1e-6: the statistics of the exact flow,
        benchmarks/bench_usa_steppers.py).
    seed : root entropy or None; chunk k draws from ``SeedSequence(entropy, spawn_key=(k,))``
    engine, max_workers, store, progress : as in :func:`metrics.run_sweep` (one file per (β, chunk))

    Returns
    -------
    xr.Dataset
        Dims ``beta``, ``time`` (and ``chunk`` for ``success``); variables ``<statistic>``,
        ``<statistic>_se``, ``theory_time``, ``success``; the run parameters and provenance in attrs.

    Examples
    --------
    >>> ds = phase_diagram([0.0, 1.0], n=4, d=3, t1=2.0, n_systems=4, n_saves=3, dt=0.5)
    >>> ds.clustered_pairs.dims, float(ds.clustered_pairs.isel(time=0).max())
    (('beta', 'time'), 0.0)
    """
    statistic = (s.statistic,) if isinstance(s.statistic, str) else tuple(s.statistic)
    # the correctly rounded arccos: a derived setting that enters the cell key must be one double everywhere
    s = replace(s, statistic=statistic, eps=exact_arccos(s.rho_c) if s.eps is None else s.eps,
                chunk=min(s.chunk, s.n_systems))
    sweep = PHASE.cells({"beta": list(s.betas)}, len(s.chunks), s, _PhaseModel(s), **run)
    return _summarise(sweep, s)


def _summarise(sweep, s: PhaseSettings) -> xr.Dataset:
    betas = np.asarray(s.betas, dtype=float)
    count = sweep["count"].values[..., 0]  # (B, K): the systems of each chunk
    total = count.sum(axis=1)[:, None]
    data = {}
    for name in s.statistic:
        s1 = sweep[f"{name}_sum"].values.sum(axis=1)  # (B, T)
        s2 = sweep[f"{name}_sumsq"].values.sum(axis=1)
        mean = s1 / total
        var = np.maximum(s2 - total * mean**2, 0.0) / (total - 1)
        long_name, units = PHASE_STATISTICS[name]
        data[name] = (("beta", "time"), mean, {"long_name": f"mean over systems of the {long_name}", "units": units})
        data[f"{name}_se"] = (("beta", "time"), np.sqrt(var / total),
                              {"long_name": f"standard error of {name} over systems", "units": units})
    # the equiangular time from rho = 0 to rho_c per beta (one scalar head lambda = 1)
    times = [theory.hitting_time(0.0, s.rho_c, [1.0], float(b), s.n, kind=s.kind) for b in betas]
    data["theory_time"] = (("beta",), np.array(times),
                           {"long_name": f"equiangular time from rho = 0 to rho = {s.rho_c:g}",
                            "units": "1"})
    data["success"] = (("beta", "chunk"), sweep["success"].values.astype(np.int8),
                       {"long_name": "1 if the chunk's run reached t1", "units": "1"})
    coords = {
        "beta": ("beta", betas, {"long_name": "inverse temperature", "units": "1"}),
        "time": time_coord(sweep["time"].values, 0.0),  # Ensemble heads M = W = I: the physical time
        "chunk": ("chunk", np.arange(sweep.sizes["seed"]),
                  {"long_name": "chunk of systems (SeedSequence spawn key)", "units": "1"}),
    }
    ds = xr.Dataset(data, coords=coords)
    config = s.config()
    ds.attrs = netcdf_safe({
        KIND_ATTR: PHASE.kind,
        "title": f"headflow phase diagram ({s.kind}, n = {s.n}, d = {s.d})",
        "history": "created by metrics.phase_diagram (cells by metrics.run_sweep)",
        **{k: v for k, v in config.items() if not isinstance(v, (list, tuple, dict))},
        "statistics": ",".join(s.statistic),
        "source": sweep.attrs["source"], "seed_entropy": sweep.attrs["seed_entropy"],
        "failed_cells": sweep.attrs["failed_cells"],  # (beta, chunk) runs that stopped, with the solver's reason
    })
    ds.attrs.update(provenance(config=config, seeds={"entropy": sweep.attrs.get("seed_entropy", ""),
                                                     "spawn_key": "(chunk index,)"}))
    return ds
