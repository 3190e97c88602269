r"""The n → ∞ study: particle systems against the mean-field solution from the same law.

:func:`mean_field_limit_study` solves the mean-field equation once, then, through the
resumable :func:`metrics.run_sweep` (one cell per (n, seed)), draws n i.i.d. tokens from the
same initial law, runs the particle flow (the model's ``summation``, ``"auto"`` by default, so
large n uses the O(n log n) sums), and measures at each save time

- on S^1: exact :math:`W_1, W_2(\mu_n(t), \mu(t))` (geodesic, radians) against the quantile
  atoms of the finite-volume reference (``fv_circle``): W1 by the circle closed form, W2 by
  ``ot.binary_search_circle`` (:func:`metrics.circle_wasserstein`);
- on S^{d-1}, d ≥ 3: the sliced :math:`SW_2` of the embedded measures (with its Monte-Carlo
  standard error ``sw2_mc_error``, :class:`metrics.SlicedReference`) against a large-n
  Lagrangian reference run; a second, independent reference run gives its own error at every
  save time (``reference_error``, SW_2 between the two runs / √2);
- the energy gap :math:`|E[\mu_n] - E[\mu]|`, the attention-entropy gap
  :math:`|\bar H[\mu_n] - \bar H[\mu]|` with :math:`\bar H[\mu] = \int (\log Z_\mu(x) -
  \beta\langle x, M m_\mu(x)\rangle)\,d\mu(x)` (the particle entropy minus log n), the cluster
  count and the cluster masses (bounded memory);

and fits the rates :math:`g \sim n^{r}` with calibrated intervals (:func:`metrics.fit_rate`;
``rate_*``, ``rate_*_ci``, ``rate_*_stderr`` data variables, per-n standard errors ``*_stderr``).
Theory (docs/theory.md §6): :math:`W(\mu_n(0), \mu(0)) \sim n^{-1/2}`, and the gap grows at most like
:math:`e^{Lt}` after.
"""

from __future__ import annotations

import json
import pickle
import time as _time
from dataclasses import KW_ONLY, dataclass, field, replace

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import NONE, AnyOf, Function, Instance, Integer, InvalidParameterError, Options, Relation

from .._observables.clustering import cluster_row
from .._observables.density import probe_density
from .._runs import params as P
from .._runs.keys import density_key
from .._statistics.rates import fit_rate
from .reference import measure_entropy, sample_grid_measure, setup_reference
from .spec import (
    Study,
    StudySettings,
    cell_rngs,
    cluster_variables,
    run_cell,
    seed_counts,
    setting,
    study_attrs,
    study_coords,
    study_function,
)

__all__ = ["mean_field_limit_study", "sample_grid_measure", "measure_entropy", "LimitSettings"]


@dataclass(frozen=True)
class LimitSettings(StudySettings):
    """The limit study's settings, one table: each field's rule, default and name in the cells' key
    (the public function's parameters derive from it); then what the study derives before its cells."""

    model: MultiHead = setting(Instance(
        MultiHead, test=lambda m: m.kind in MEAN_FIELD_KINDS,
        what="a particles.MultiHead with kind 'usa' or 'softmax' (the kinds the mean-field solvers accept)"), key=True)
    density_fn: object = setting(Function("a density function density_fn(points) -> (m,) on the sphere"))
    _: KW_ONLY
    n_values: tuple = setting(P.N_VALUES, (16, 32, 64, 128, 256))
    n_seeds: int = setting(P.N_SEEDS, 4)
    t1: float = setting(P.T1, 2.0, key=True)
    n_saves: int = setting(P.N_SAVES, 5, key=True)
    m_grid: int = setting(Integer(8, hint="The S^1 grid has m_grid cells, e.g. 1024."), 1024, key=True)
    dt: float = setting(P.DT, 0.01, key=True)
    seed: int = setting(P.SEED, 0)
    kappa: float = setting(P.KAPPA, np.inf, key=True)
    n_reference: int | None = setting(AnyOf(NONE, Integer(2)), None, key=True)
    transport: str = setting(Options("auto", "emd2", "circle"), "auto", key=True)
    n_projections: int = setting(P.N_PROJECTIONS, 256, key="L")
    n_quantiles: int = setting(Integer(2), 16384, key="Q")
    w2_max_n: int = setting(Integer(1), 100_000, key=True)
    eps_cluster: float = setting(P.EPS_CLUSTER, 1e-3, key="eps")
    max_clusters: int = setting(P.MAX_CLUSTERS, 8, key="K")
    sampling: str = setting(Options("independent", "nested"), "independent", key=True)
    interval: str = setting(Options("t", "bootstrap"), "t")
    n_boot: int = setting(P.N_BOOT, 2000)
    reference: str = setting(Options("auto", "spectral", "fv_circle", "lagrangian"), "auto")
    # derived: the mean-field reference the cells measure against, its name, the density's key
    mean_field: object = field(default=None, compare=False, repr=False)
    reference_name: str = field(default="", metadata={"key": "reference"})
    density_key: str = field(default="", metadata={"key": "density"})

    RELATIONS = (
        P.DT_LE_T1, P.SEEDS_PER_N,
        Relation(("n_seeds", "sampling"), lambda n, s: s == "independent" or isinstance(n, int) or len(set(n)) == 1,
                 "must be one integer with sampling='nested' (seed s of every n shares its draws)",
                 breaks={"n_seeds": [2, 3], "n_values": [4, 8], "sampling": "nested"}),
        Relation(("w2_max_n", "n_values"), lambda w, nv: w >= nv[1],
                 "must be >= the second n_values entry (the W2 rate needs W2 at two n at least); raise it",
                 breaks={"w2_max_n": 5, "n_values": [4, 8]}),
        # a reference coarser than the runs it measures would make its own error the result (with "auto" this
        # is checked when a Lagrangian reference is built; a spectral one ignores it)
        Relation(("n_reference", "reference", "n_values"),
                 lambda n, r, nv: n is None or r != "lagrangian" or n >= nv[-1],
                 "must be >= the largest n_values entry for a Lagrangian reference; raise it or leave it None",
                 breaks={"n_reference": 4, "n_values": [4, 8], "reference": "lagrangian"}),
        Relation(("reference", "model"),
                 lambda r, m: r in ("auto", "spectral", "fv_circle" if m.d == 2 else "lagrangian"),
                 "must be 'auto', 'spectral' or the fallback of the model's sphere ('fv_circle' on S^1, 'lagrangian' "
                 "on S^{d-1} with d >= 3)", breaks={"reference": "lagrangian"}),
    )


def _study_cell(params: dict, seed_index: int, s: LimitSettings, entropy: int) -> xr.Dataset:
    """One (n, seed) particle run of the study (``run_sweep(cell_fn=...)``: the sweep loads, stamps
    and writes cells)."""
    n, ref, ts = int(params["n_particles"]), s.mean_field, s.ts
    # independent: every (n, seed) cell has its own stream; nested: seed s of every n shares one
    # stream, so the sample of n is a prefix-like subset of the sample of a larger n
    rng_init, rng_noise = cell_rngs(entropy, *((seed_index,) if s.sampling == "nested" else (seed_index, n)))
    x0, distances = ref.sample(n, rng_init), ref.distances(n)

    def save_fn(t, x):
        k = int(np.argmin(np.abs(ts - t)))
        row = distances(x, k)
        row["energy_gap"] = abs(mf.measure_energy(s.model, x) - ref.energy[k])
        row["entropy_gap"] = abs(measure_entropy(s.model, x) - ref.entropy[k])
        row.update(cluster_row(x, eps=s.eps_cluster, max_clusters=s.max_clusters))
        return row

    return run_cell(x0, s, save_fn, rng_noise)


def _limit_key(s: LimitSettings, legacy: bool = False) -> dict:
    """Key format 2 of a limit-study cell: the settings' key fields, from the configuration alone (the
    density by its values at the probe points, :func:`metrics._runs.keys.density_key`; the sliced
    directions on d >= 3). ``legacy``: format 1, the density through the reference's energies and the
    model's fields as they are (stores written before format 2 are migrated)."""
    key = s.key(legacy)
    if legacy:
        key["density"] = np.asarray(s.mean_field.energy).tolist()
    if s.model.d >= 3:
        key["sliced"] = s.mean_field.sliced.representation
    return key


def _limit_key_v1(s: LimitSettings) -> dict:
    return _limit_key(s, legacy=True)


LIMIT = Study(name="mean_field_limit_study", kind="study", label="S^{sphere} study", cell=_study_cell, key=_limit_key,
              key_version=2, legacy_key=_limit_key_v1)


@study_function(LimitSettings)
def mean_field_limit_study(s: LimitSettings, **run) -> xr.Dataset:
    r"""Run the study and return a Dataset with dims (n_particles, seed, time).

    Parameters
    ----------
    model : MultiHead (kind "usa" or "softmax", any number of heads)
        On d = 2 the reference is ``fv_circle``; on d ≥ 3 two independent Lagrangian reference runs
        of ``n_reference`` particles (the second measures the first's error at every save time).
        Noise ``kappa`` is allowed on both.
    density_fn : callable
        Unnormalised initial density ``density_fn(points)``, points of shape (m, d) on S^{d-1}
        (on S^1 a function of the angle enters through :func:`metrics.density_of_angle`);
        :func:`metrics.check_density_fn` checks a density against this convention.
    n_values : strictly increasing positive integers
    n_seeds : int or sequence of int
        Seeds per n (the rate intervals come from their spread; with one seed they are NaN), or one
        count per n (independent sampling): small n are cheap and their log-gaps as noisy as those
        of large n, so e.g. ``(40, 40, 20, 10, 5)`` narrows the interval at little cost. Seeds an n
        does not run are NaN in the Dataset (``n_seeds_run`` gives the count).
    t1, n_saves, dt : time horizon, number of save times in [0, t1], RK4 step of the particle runs
    m_grid : int
        Cells of the S^1 grid (its error, ≤ 2π/m_grid in W_p, must stay below the n^{-1/2} gap), or
        the grid used to bound the density on d ≥ 3.
    kappa : float
        Noise (inverse temperature of the Brownian part); np.inf is noiseless.
    n_reference : int, optional
        Particles of the d ≥ 3 reference (default 16·max(n_values)).
    transport : {"auto", "emd2", "circle"}
        S^1 distance method of :func:`metrics.circle_wasserstein`: "auto" = "circle" (exact closed
        form / binary search); "emd2" is the network simplex (a slow cross-check).
    w2_max_n : int
        Largest n for which W2 is computed on S^1 (``ot.binary_search_circle`` costs seconds per
        call at n = 10^5); beyond it ``w2`` is NaN and only W1 is reported.
    n_projections, n_quantiles : directions of the sliced SW_2 and quantile atoms (nodes of the
        piecewise-linear quantile function for a spectral reference) kept per projected
        reference (d ≥ 3, :class:`metrics.SlicedReference`)
    eps_cluster, max_clusters : geodesic linking distance (rad; the default 1e-3 resolves collapsed
        states: a sample of a smooth density, with spacing ≫ ε, has ``n_clusters`` ≈ n and top masses
        ≈ 1/n until the flow concentrates it); number of largest cluster masses kept
    sampling : {"independent", "nested"}
        "independent" (default): every (n, seed) cell draws its own sample (``SeedSequence(seed,
        spawn_key=(seed index, n))``), so the errors of different n are independent.
        "nested": seed s draws from one stream for every n (``spawn_key=(seed index,)``), so
        samples of different n overlap and their errors are correlated; the rate intervals are
        then paired (whole seeds across n). Recorded in the ``sampling`` attr.
    interval : {"t", "bootstrap"}
        Rate intervals of :func:`metrics.fit_rate`: the delta-method t interval (default,
        calibrated: 95 % intervals cover a known exponent in 95 % of synthetic studies) or the
        percentile bootstrap over seeds (too narrow with few seeds).
    n_boot : bootstrap resamples when ``interval="bootstrap"``
    store, engine, max_workers, progress
        Passed to :func:`metrics.run_sweep`: a folder for one netCDF file per finished (n, seed)
        cell (resumable), "serial"/"process"/dask client, and the progress bars ("reference",
        then "S^{d-1} study" over the cells; ``None``: shown once a step has run 2 s, ``True``:
        at once, ``False``: never). The spectral reference is rebuilt on every run (seconds,
        ``reference_seconds`` in the attrs); a finite-volume or Lagrangian one is kept in
        ``store`` (``reference_<hash>.nc``, keyed by every setting it depends on, the density's
        values on the grid included), so a rerun loads it (attrs ``reference_build_seconds``,
        ``reference_cached``, ``reference_file``).
    reference : {"auto", "spectral", "fv_circle", "lagrangian"}
        The mean-field solution the particles are measured against. ``"auto"`` (default): the
        spectral solution (:class:`metrics.spectral_reference.StudyReference`: exponentially
        accurate, its error bound and spectral tail in the attrs) wherever it applies (S^1 with
        scaled-rotation heads; S^2; d ≥ 4 with scalar heads and a density zonal about the last
        axis), else ``fv_circle`` on S^1 and two Lagrangian runs on S^{d-1}. ``"spectral"`` refuses
        a problem it does not cover.
    """
    t_start = _time.perf_counter()
    probe = probe_density(s.density_fn, s.model.d, LIMIT.name)
    _check_run(s, run["engine"])
    ref = setup_reference(s, store=run["store"], progress=run["progress"])
    ref_attrs = {**ref["attrs"], **({"reference_note": ref["note"]} if ref["note"] else {})}  # why not spectral
    t_ref = _time.perf_counter() - t_start
    s = replace(s, mean_field=ref["reference"], reference_name=ref_attrs["reference"], density_key=density_key(probe))
    sweep = LIMIT.run(s, **run)
    d, paired, counts = s.model.d, s.sampling == "nested", np.asarray(seed_counts(s.n_seeds, s.n_values))
    ds = xr.Dataset(_study_data(sweep, ref, s, counts),
                    coords=study_coords(s.n_values, counts, s.ts, s.model.log_time_scale, s.max_clusters,
                                        "probability level of the interval bound"))
    main_w = "w1" if d == 2 else "sw2"
    ds.attrs = study_attrs(
        LIMIT, title=f"headflow mean-field limit study on S^{d - 1}", model=s.model, sweep=sweep,
        config={**s.config(), "n_seeds": counts.tolist(), "reference": ref_attrs["reference"]},
        seed=s.seed, spawn_key="(seed index,)" if paired else "(seed index, n)", t_start=t_start,
        **{name: getattr(s, name) for name in _ATTRS}, seed_entropy=str(np.random.SeedSequence(s.seed).entropy),
        rate_metric=main_w, rate_at_t0=float(ds[f"rate_{main_w}"].isel(time=0)),
        rate_at_t0_ci=ds[f"rate_{main_w}_ci"].isel(time=0).values.tolist(),
        rate_interval=("delta-method t interval (metrics.fit_rate)" if s.interval == "t"
                       else "percentile bootstrap over seeds (metrics.fit_rate)")
        + (", paired: whole seeds across n" if paired else ", independent samples per n"),
        transport_method=json.dumps(ref["transports"]), **_METHOD_NOTES[min(d, 3)], reference_seconds=float(t_ref),
        **ref_attrs)
    return ds


#: how the study measures, per sphere (S^1: 2; S^{d-1}, d >= 3: 3)
_METHOD_NOTES = {
    2: {"transport_note": "S^1: exact W_p against M = max(4n, 4 m_grid) quantile atoms of the reference; the "
                          "emd2 and circle methods compute the same number",
        "clustering": "exact geodesic eps-linking (metrics.cluster_sizes): sorted angles, O(n log n)"},
    3: {"transport_note": "S^{d-1}: sliced SW_2 of the embedded measures, a metric with the same n^{-1/2} rate as "
                          "W_2 for i.i.d. samples (metrics.limit); sw2_mc_error is its Monte-Carlo standard error",
        "clustering": "exact geodesic eps-linking (metrics.cluster_sizes): grid cubes and KD-trees, O(n d) memory"},
}


#: the settings the Dataset also holds as attrs of their own
_ATTRS = ("m_grid", "dt", "t1", "kappa", "sampling")


def _study_data(sweep, ref, s: LimitSettings, counts) -> dict:
    """The study's data variables: the gaps per (n, seed, time), cluster masses, the mean-field
    energy and entropy, per-n standard errors and the fitted rates with their intervals."""
    units = {"w1": "rad", "w2": "rad", "sw2": "1"}
    long = {
        "w1": "W1(mu_n(t), mu(t)), geodesic cost",
        "w2": "W2(mu_n(t), mu(t)), geodesic cost",
        "sw2": "sliced W2(mu_n(t), mu_ref(t)) of the embedded measures",
        "sw2_mc_error": "Monte-Carlo standard error of sw2 (over directions, delta method)",
        "energy_gap": "|E_multi[mu_n(t)] - E_multi[mu(t)]|",
        "entropy_gap": "|H[mu_n(t)] - H[mu(t)]|, head-averaged attention entropy (nats)",
    }
    dims = ("n_particles", "seed", "time")
    data = {v: (dims, sweep[v].values, {"long_name": long[v], "units": units.get(v, "1")})
            for v in long if v in sweep}
    data.update(cluster_variables(sweep, s.max_clusters, s.eps_cluster, counts))
    present = np.arange(max(counts))[None, :, None] < counts[:, None, None]
    if s.model.d >= 3:
        data["reference_error"] = (("time",), ref["error_t"], {"long_name": ref["error_t_long"], "units": "1"})
    data["energy_meanfield"] = (("time",), np.asarray(s.mean_field.energy),
                                {"long_name": "mean-field energy E_multi[mu(t)]", "units": "1"})
    data["entropy_meanfield"] = (("time",), np.asarray(s.mean_field.entropy),
                                 {"long_name": "mean-field attention entropy H[mu(t)] (nats)", "units": "1"})
    paired, n_values = s.sampling == "nested", np.asarray(s.n_values)
    for v in s.mean_field.rated:
        g = sweep[v].values  # (N, S, T), NaN beyond the seeds of each n
        gp = np.where(present, g, 0.0)
        mean = gp.sum(axis=1) / counts[:, None]
        ss = (np.where(present, g - mean[:, None, :], 0.0) ** 2).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):  # one seed: no spread, NaN
            se = np.where(counts[:, None] > 1, np.sqrt(ss / (counts[:, None] - 1) / counts[:, None]), np.nan)
        data[f"{v}_stderr"] = (("n_particles", "time"), se,
                               {"long_name": f"standard error of the seed mean of {v}", "units": units.get(v, "1")})
        # W2 is skipped above w2_max_n: the rate of w2 is fitted over the n that have it
        rows = np.array([np.all(np.isfinite(g[i, :c])) for i, c in enumerate(counts)]) if v == "w2" \
            else np.ones(len(n_values), bool)
        fits = np.array([fit_rate(n_values[rows], g[rows][:, :, k], paired=paired, interval=s.interval, n_boot=s.n_boot,
                                  rng=s.seed, counts=counts[rows])[:4] for k in range(len(s.ts))])
        data[f"rate_{v}"] = (("time",), fits[:, 0], {"long_name": f"fitted exponent r in {v} ~ n^r", "units": "1"})
        data[f"rate_{v}_ci"] = (("time", "bound"), fits[:, 1:3],
                                {"long_name": f"95% {'t' if s.interval == 't' else 'bootstrap'} interval of rate_{v} "
                                              f"({'paired over seeds' if paired else 'independent n'})",
                                 "units": "1"})
        data[f"rate_{v}_stderr"] = (("time",), fits[:, 3], {"long_name": f"standard error of rate_{v}",
                                                            "units": "1"})
    return data


def _check_run(s: LimitSettings, engine) -> None:
    """What a study checks before any reference run that its declaration cannot: the engine's
    preconditions (main guard, a picklable density)."""
    if engine == "process":
        from .._runs.executors import check_not_bootstrapping

        # before the reference run: in a worker re-importing an unguarded script it would be wasted
        check_not_bootstrapping(LIMIT.name)
    if engine == "process" and s.model.d >= 3:
        # the cells on S^{d-1} sample from density_fn in the workers: refuse before the reference runs
        try:
            pickle.dumps(s.density_fn)
        except Exception as exc:
            raise InvalidParameterError(
                "density_fn of mean_field_limit_study must be picklable with engine='process' (the workers "
                f"sample from it on S^{s.model.d - 1}); got {s.density_fn!r} ({exc}). Define it with def at module "
                "level, or use engine='serial' or a dask client (which pickles lambdas).") from exc
