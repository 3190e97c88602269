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

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import (
    NONE,
    AnyOf,
    Function,
    Instance,
    Integer,
    InvalidParameterError,
    Options,
    Relation,
    check_param,
    declare,
)

from .._data.provenance import model_attrs
from .._observables.clustering import cluster_row
from .._observables.density import probe_density
from .._runs import params as P
from .._runs.keys import density_key, model_key
from .._statistics.rates import fit_rate
from .reference import measure_entropy, sample_grid_measure, setup_reference
from .spec import Study, cluster_variables, run_cell, seed_counts, study_attrs, study_coords

__all__ = ["mean_field_limit_study", "sample_grid_measure", "measure_entropy"]


def _study_cell(params: dict, seed_index: int, settings: dict) -> xr.Dataset:
    """One (n, seed) particle run of the study (``run_sweep(cell_fn=...)``: the sweep loads, stamps
    and writes cells)."""
    n = int(params["n_particles"])
    model, ts = settings["model"], settings["ts"]
    # independent: every (n, seed) cell has its own stream; nested: seed s of every n shares one
    # stream, so the sample of n is a prefix-like subset of the sample of a larger n
    spawn_key = (seed_index,) if settings["sampling"] == "nested" else (seed_index, n)
    ss = np.random.SeedSequence(settings["entropy"], spawn_key=spawn_key)
    rng_init, rng_noise = (np.random.default_rng(s) for s in ss.spawn(2))
    ref, K = settings["reference"], settings["max_clusters"]
    x0 = ref.sample(n, rng_init)
    distances = ref.distances(n)

    def save_fn(t, x):
        k = int(np.argmin(np.abs(ts - t)))
        row = distances(x, k)
        row["energy_gap"] = abs(mf.measure_energy(model, x) - ref.energy[k])
        row["entropy_gap"] = abs(measure_entropy(model, x) - ref.entropy[k])
        row.update(cluster_row(x, eps=settings["eps_cluster"], max_clusters=K))
        return row

    return run_cell(x0, model, settings, save_fn, rng_noise)


def _limit_key(settings: dict, *, model=None, density=None) -> dict:
    """Key format 2 of a limit-study cell: every setting a cell depends on, from the configuration
    alone (the density by its values at the probe points, :func:`metrics._runs.keys.density_key`; the
    sliced directions on d >= 3)."""
    ref = settings["reference"]
    return {"model": model or model_key(settings["model"]), "t1": settings["t1"], "dt": settings["dt"],
            "n_saves": settings["n_saves"], "m_grid": settings["m_grid"], "kappa": settings["kappa"],
            "transport": settings["transport"], "n_reference": settings["n_reference"],
            "eps": settings["eps_cluster"], "K": settings["max_clusters"], "w2_max_n": settings["w2_max_n"],
            "sampling": settings["sampling"], "L": settings["n_projections"], "Q": settings["n_quantiles"],
            "reference": settings["reference_name"], "density": density or settings["density_key"],
            **({"sliced": ref.sliced.representation} if settings["model"].d >= 3 else {})}


def _limit_key_v1(settings: dict) -> dict:
    """Key format 1 (stores written before format 2 are migrated): the density through the
    reference's energies, the model's fields as they are."""
    return _limit_key(settings, model=model_attrs(settings["model"]),
                      density=np.asarray(settings["reference"].energy).tolist())


LIMIT = Study(name="mean_field_limit_study", kind="study", label="S^{sphere} study", cell=_study_cell, key=_limit_key,
              key_version=2, legacy_key=_limit_key_v1)

def _seed_counts_ok(n_seeds, sampling) -> bool:
    return sampling == "independent" or isinstance(n_seeds, int) or len(set(n_seeds)) == 1


@declare(
    model=Instance(MultiHead, test=lambda m: m.kind in MEAN_FIELD_KINDS,
                   what="a particles.MultiHead with kind 'usa' or 'softmax' (the kinds the mean-field solvers accept)"),
    density_fn=Function("a density function density_fn(points) -> (m,) on the sphere"),
    n_values=P.N_VALUES, n_seeds=P.N_SEEDS, t1=P.T1, n_saves=P.N_SAVES,
    m_grid=Integer(8, hint="The S^1 grid has m_grid cells, e.g. 1024."), dt=P.DT, seed=P.SEED, kappa=P.KAPPA,
    n_reference=AnyOf(NONE, Integer(2)), transport=Options("auto", "emd2", "circle"), n_projections=P.N_PROJECTIONS,
    n_quantiles=Integer(2), w2_max_n=Integer(1), eps_cluster=P.EPS_CLUSTER, max_clusters=P.MAX_CLUSTERS,
    sampling=Options("independent", "nested"), interval=Options("t", "bootstrap"), n_boot=P.N_BOOT,
    reference=Options("auto", "spectral", "fv_circle", "lagrangian"), **P.RUN_OPTIONS,
    relations=[
        P.DT_LE_T1, P.SEEDS_PER_N,
        Relation(("n_seeds", "sampling"), _seed_counts_ok,
                 "must be one integer with sampling='nested' (seed s of every n shares its draws)",
                 breaks={"n_seeds": [2, 3], "n_values": [4, 8], "sampling": "nested"}),
        Relation(("w2_max_n", "n_values"), lambda w, nv: w >= nv[1],
                 "must be >= the second n_values entry (the W2 rate needs W2 at two n at least); raise it",
                 breaks={"w2_max_n": 5, "n_values": [4, 8]}),
    ])
def mean_field_limit_study(model: MultiHead, density_fn, *, n_values=(16, 32, 64, 128, 256), n_seeds: int = 4,
                           t1: float = 2.0, n_saves: int = 5, m_grid: int = 1024, dt: float = 0.01,
                           seed: int = 0, kappa: float = np.inf, n_reference: int | None = None,
                           transport: str = "auto", n_projections: int = 256, n_quantiles: int = 16384,
                           w2_max_n: int = 100_000, eps_cluster: float = 1e-3, max_clusters: int = 8,
                           sampling: str = "independent", interval: str = "t", n_boot: int = 2000,
                           store=None, engine="serial", max_workers: int | None = None,
                           progress: bool | None = None, reference: str = "auto") -> xr.Dataset:
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
    density_values = probe_density(density_fn, model.d, "mean_field_limit_study")
    n_reference = _check_run(model, density_fn, n_values, n_reference, engine, reference)
    counts = seed_counts(n_seeds, n_values)
    d, t_start = model.d, _time.perf_counter()
    ts = np.linspace(0.0, float(t1), int(n_saves))
    ref = setup_reference(model, density_fn, ts, dict(
        m_grid=int(m_grid), kappa=kappa, dt=float(dt), t1=float(t1), n_saves=int(n_saves), n_values=n_values,
        n_reference=n_reference, seed=seed, n_projections=int(n_projections), n_quantiles=int(n_quantiles),
        transport=transport, w2_max_n=int(w2_max_n), reference=reference, store=store, progress=progress))
    ref_attrs, metrics_rated, transports = ref["attrs"], list(ref["reference"].rated), ref["transports"]
    ref_attrs.update({"reference_note": ref["note"]} if ref["note"] else {})  # why the spectral one was not used
    t_ref = _time.perf_counter() - t_start
    # what a cell reads (the reference object carries the transport settings) and what its key holds
    settings = {"model": model, "ts": ts, "t1": float(t1), "dt": float(dt), "kappa": float(kappa),
                "eps_cluster": float(eps_cluster), "max_clusters": int(max_clusters), "sampling": sampling,
                "reference": ref["reference"], "reference_name": ref_attrs["reference"], "n_saves": n_saves,
                "m_grid": m_grid, "transport": transport, "n_reference": n_reference, "w2_max_n": w2_max_n,
                "n_projections": n_projections, "n_quantiles": n_quantiles, "density_key": density_key(density_values)}
    sweep = LIMIT.run(model, n_values, counts, settings, seed=seed, t1=float(t1), dt=float(dt), n_saves=int(n_saves),
                      kappa=float(kappa), engine=engine, max_workers=max_workers, store=store, progress=progress)
    K, paired = int(max_clusters), sampling == "nested"
    data = _study_data(sweep, ref, settings, metrics_rated, n_values, ts, d=d, K=K, eps_cluster=eps_cluster,
                       paired=paired, interval=interval, n_boot=n_boot, seed=seed, counts=np.asarray(counts))
    coords = study_coords(n_values, counts, ts, model.log_time_scale, K, "probability level of the interval bound")
    ds = xr.Dataset(data, coords=coords)
    main_w = "w1" if d == 2 else "sw2"
    config = {"n_values": list(n_values), "n_seeds": counts, "t1": t1, "n_saves": n_saves, "m_grid": m_grid, "dt": dt,
              "seed": seed, "kappa": kappa, "density_fn": density_fn, "sampling": sampling, "interval": interval,
              "model": model_attrs(model), "transport": transport, "n_reference": n_reference,
              "reference": ref_attrs["reference"]}
    ds.attrs = study_attrs(
        LIMIT, title=f"headflow mean-field limit study on S^{d - 1}", model=model, sweep=sweep, config=config,
        seed=seed,
        spawn_key="(seed index,)" if paired else "(seed index, n)", t_start=t_start,
        m_grid=int(m_grid), dt=float(dt), t1=float(t1), kappa=float(kappa),
        seed_entropy=str(np.random.SeedSequence(seed).entropy), rate_metric=main_w,
        rate_at_t0=float(ds[f"rate_{main_w}"].isel(time=0)),
        rate_at_t0_ci=ds[f"rate_{main_w}_ci"].isel(time=0).values.tolist(), sampling=sampling,
        rate_interval=("delta-method t interval (metrics.fit_rate)" if interval == "t"
                       else "percentile bootstrap over seeds (metrics.fit_rate)")
        + (", paired: whole seeds across n" if paired else ", independent samples per n"),
        transport_method=json.dumps(transports), **_METHOD_NOTES[min(d, 3)], reference_seconds=float(t_ref),
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


def _study_data(sweep, ref, settings, metrics_rated, n_values, ts, *, d, K, eps_cluster, paired, interval, n_boot,
                seed, counts) -> dict:
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
    data.update(cluster_variables(sweep, K, eps_cluster, counts))
    present = np.arange(max(counts))[None, :, None] < counts[:, None, None]
    if d >= 3:
        data["reference_error"] = (("time",), ref["error_t"], {"long_name": ref["error_t_long"], "units": "1"})
    data["energy_meanfield"] = (("time",), np.asarray(settings["reference"].energy),
                                {"long_name": "mean-field energy E_multi[mu(t)]", "units": "1"})
    data["entropy_meanfield"] = (("time",), np.asarray(settings["reference"].entropy),
                                 {"long_name": "mean-field attention entropy H[mu(t)] (nats)", "units": "1"})
    for v in metrics_rated:
        g = sweep[v].values  # (N, S, T), NaN beyond the seeds of each n
        gp = np.where(present, g, 0.0)
        mean = gp.sum(axis=1) / counts[:, None]
        dev = np.where(present, g - mean[:, None, :], 0.0)
        scale = np.max(np.abs(dev), axis=1, initial=0.0)  # (squares of gaps near 1e169, USA at large beta, overflow)
        with np.errstate(invalid="ignore", divide="ignore"):  # one seed: no spread, NaN
            ss = ((dev / np.where(scale > 0, scale, 1.0)[:, None, :]) ** 2).sum(axis=1)
            se = np.where(counts[:, None] > 1, scale * np.sqrt(ss / (counts[:, None] - 1) / counts[:, None]), np.nan)
        data[f"{v}_stderr"] = (("n_particles", "time"), se,
                               {"long_name": f"standard error of the seed mean of {v}", "units": units.get(v, "1")})
        # W2 is skipped above w2_max_n: the rate of w2 is fitted over the n that have it
        rows = np.array([np.all(np.isfinite(g[i, :c])) for i, c in enumerate(counts)]) if v == "w2" \
            else np.ones(len(n_values), bool)
        # (fewer than two n with every seed finite, e.g. every cell failed: no rate, NaN, the failures are named)
        fits = np.array([fit_rate(np.asarray(n_values)[rows], g[rows][:, :, k], paired=paired, interval=interval,
                                  n_boot=n_boot, rng=seed, counts=counts[rows])[:4] if rows.sum() >= 2
                         else [np.nan] * 4 for k in range(len(ts))])
        data[f"rate_{v}"] = (("time",), fits[:, 0], {"long_name": f"fitted exponent r in {v} ~ n^r", "units": "1"})
        data[f"rate_{v}_ci"] = (("time", "bound"), fits[:, 1:3],
                                {"long_name": f"95% {'t' if interval == 't' else 'bootstrap'} interval of rate_{v} "
                                              f"({'paired over seeds' if paired else 'independent n'})",
                                 "units": "1"})
        data[f"rate_{v}_stderr"] = (("time",), fits[:, 3], {"long_name": f"standard error of rate_{v}",
                                                            "units": "1"})
    return data


def _check_run(model, density_fn, n_values, n_reference, engine, reference):
    """What a study checks before any reference run: the reference's size, the engine's
    preconditions (main guard, a picklable density) and the reference kind; returns n_reference."""
    if n_reference is not None:
        # a reference coarser than the runs it measures would make its own error the result; with
        # reference="auto" this is checked when a Lagrangian reference is built (a spectral one ignores it)
        low = max(n_values) if reference == "lagrangian" else 2
        n_reference = check_param(n_reference, "n_reference", "mean_field_limit_study", low=low, integer=True)
    if engine == "process":
        from .._runs.executors import check_not_bootstrapping

        # before the reference run: in a worker re-importing an unguarded script it would be wasted
        check_not_bootstrapping("mean_field_limit_study")
    if engine == "process" and model.d >= 3:
        # the cells on S^{d-1} sample from density_fn in the workers: refuse before the reference runs
        try:
            pickle.dumps(density_fn)
        except Exception as exc:
            raise InvalidParameterError(
                "density_fn of mean_field_limit_study must be picklable with engine='process' (the workers "
                f"sample from it on S^{model.d - 1}); got {density_fn!r} ({exc}). Define it with def at module "
                "level, or use engine='serial' or a dask client (which pickles lambdas)."
            ) from exc
    d = model.d
    if reference not in ("auto", "spectral", ("fv_circle" if d == 2 else "lagrangian")):
        raise InvalidParameterError(
            f"reference of mean_field_limit_study must be 'auto', 'spectral' or "
            f"{'fv_circle' if d == 2 else 'lagrangian'!r} on S^{d - 1}; got {reference!r}.")
    return n_reference
