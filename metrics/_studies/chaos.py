r"""How long n tokens follow the mean field from the uniform state: the propagation-of-chaos horizon study.

The uniform measure σ on :math:`S^{d-1}` is an exact stationary solution of the mean-field equation,
so for i.i.d. uniform tokens the mean-field reference is σ itself at every time, known in closed
form. :func:`chaos_horizon_study` runs, through the resumable :func:`metrics.run_sweep` (one cell per
(n, seed)), the particle flow from n i.i.d. uniform tokens and records at each save time

- the distance to the mean field: exact :math:`W_1(\mu_n(t), \sigma)` on :math:`S^1` (geodesic,
  radians; the circle closed form of :mod:`metrics._studies.limit` against 4n quantile atoms of σ, error
  2π/(16 n)); on :math:`S^2` the sliced :math:`SW_2` of the embedded measures against σ, exact per
  direction because the projection of σ on any axis is uniform on [-1, 1] (Archimedes);
- the degree amplitudes :math:`A_l`, l = 1..l_max (:func:`metrics.harmonic_amplitudes`);
- the cluster count and the largest cluster masses (bounded memory, :mod:`metrics._studies.limit`);

and, per (δ, n, seed), the breakdown time :math:`t_\delta` at which the amplitude of the most
unstable degree :math:`A_{l^*}` reaches δ, the linearised prediction from the run's own
:math:`A_{l^*}(0)` (:mod:`metrics._statistics.horizon`), the distance-based time at which the distance reaches δ,
the dominant degree at breakdown, the normalised :math:`Z = \sigma^* t_\delta - \tfrac12\log n -
\log\delta` with a Kolmogorov–Smirnov p-value against its closed-form law, and the slope of the
seed-mean :math:`t_\delta` against log n with a bootstrap interval, next to the predicted
:math:`1/(2\sigma^*)`. In the stable regime (σ* ≤ 0, e.g. noise κ < κ*) no breakdown is expected and
:math:`\sup_t\sqrt n\,W(t)` (``sup_scaled_distance``) is the observable.
"""

from __future__ import annotations

import time as _time
from functools import partial

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import (
    AnyOf,
    Function,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Options,
    SequenceOf,
    declare,
)

from .._data.provenance import model_attrs
from .._observables.clustering import cluster_row
from .._observables.density import probe_density
from .._observables.harmonics import harmonic_amplitudes
from .._runs import params as P
from .._runs.keys import density_key, model_key
from .._statistics.horizon import breakdown_law_mean, largest_breakdown_value
from .chaos_breakdown import breakdown
from .reference import UniformReference
from .spec import Study, cluster_variables, run_cell, seed_counts, study_attrs, study_coords

__all__ = ["chaos_horizon_study"]

#: largest |Δ log A_{l*}| per save interval (σ* Δt) that still resolves t_δ
MAX_LOG_STEP = 0.25
#: units of the study's times (t_delta, its prediction, the slope d t_delta / d log n) and, inverted, of its
#: rates: the time of the dynamics, which the time coordinate counts (dimensionless, so that coordinate says "1")
TIME_UNITS = "time"


def _chaos_cell(params: dict, seed_index: int, settings: dict) -> xr.Dataset:
    """One (n, seed) run from i.i.d. tokens of the reference's initial law, with run_sweep's cell
    contract (dims ``time``); the distance is to the reference's μ(t_k) at each save."""
    n = int(params["n_particles"])
    model, ts, d, L, K = settings["model"], settings["ts"], settings["d"], settings["l_max"], settings["max_clusters"]
    ref = settings["reference"]
    # independent draws per (seed, n): the fit's bootstrap resamples the seeds of each n separately
    ss = np.random.SeedSequence(settings["entropy"], spawn_key=(seed_index, n))
    rng_init, rng_noise = (np.random.default_rng(s) for s in ss.spawn(2))
    x0 = ref.sample(n, rng_init)
    distance, name = ref.distances(n), "w1" if d == 2 else "sw2"

    def save_fn(t, x):
        row = {"distance": distance(x, int(np.argmin(np.abs(ts - t))))[name]}
        for l, a in enumerate(harmonic_amplitudes(x, L)[1:], start=1):
            row[f"amplitude_{l}"] = a
        row.update(cluster_row(x, eps=settings["eps_cluster"], max_clusters=K))
        return row

    return run_cell(x0, model, settings, save_fn, rng_noise)


def _chaos_key(settings: dict, legacy: bool = False) -> dict:
    """Key of a chaos cell, from the configuration alone: format 1 for the uniform start, format 2 for a
    density start (the density by its values at the probe points, as in the limit study). ``legacy``:
    format 1 everywhere (a density through the reference's energies, the model's fields as they are),
    whose stores are migrated where it differs."""
    ref = settings["reference"]
    if isinstance(ref, UniformReference):
        density = {}
    elif legacy:
        density = {"density": np.asarray(ref.energy).tolist()}
    else:
        density = {"density": settings["density_key"], "key_version": 2}
    return {"study": "chaos_horizon_study", "model": (model_attrs if legacy else model_key)(settings["model"]),
            "l_max": settings["l_max"], "L": settings["n_projections"], "eps": settings["eps_cluster"],
            "K": settings["max_clusters"], "spawn_key": "(seed index, n)", **density}


CHAOS = Study(name="chaos_horizon_study", kind="chaos", label="chaos study", cell=_chaos_cell, key=_chaos_key,
              legacy_key=partial(_chaos_key, legacy=True))

_POSITIVE_DELTA = Interval(0, None, closed="neither")


@declare(
    model=Instance(MultiHead, test=lambda m: m.kind in MEAN_FIELD_KINDS and m.d in (2, 3),
                   what="a particles.MultiHead with scalar heads, kind 'usa' or 'softmax', on S^1 or S^2 (d = 2 or 3)",
                   hint="Build it with MultiHead.scalar([lam], d, beta=..., kind=...)."),
    density=AnyOf(Options("uniform"), Function("a density function density(points) -> (m,) on the sphere")),
    n_values=SequenceOf(Integer(2), min_len=2, increasing=True,
                        hint="The slope is fitted against log n: pass at least two increasing n >= 2."),
    n_seeds=P.N_SEEDS, t1=P.T1, n_saves=P.N_SAVES,
    delta=AnyOf(_POSITIVE_DELTA, SequenceOf(_POSITIVE_DELTA),
                hint="Use e.g. delta=0.1 (a breakdown is a distance or amplitude reaching delta)."),
    kappa=P.KAPPA, l_max=Integer(1), dt=P.DT, seed=P.SEED, n_projections=P.N_PROJECTIONS,
    eps_cluster=P.EPS_CLUSTER, max_clusters=P.MAX_CLUSTERS, n_boot=P.N_BOOT, **P.RUN_OPTIONS,
    relations=[P.DT_LE_T1, P.SEEDS_PER_N])
def chaos_horizon_study(model: MultiHead, density: str = "uniform", *, n_values=(100, 1000, 10000),
                        n_seeds: int = 8, t1: float = 12.0, n_saves: int = 241, delta=(0.05, 0.1),
                        kappa: float = np.inf, l_max: int = 6, dt: float = 0.05, seed: int = 0,
                        n_projections: int = 64, eps_cluster: float = 1e-2, max_clusters: int = 8,
                        n_boot: int = 1000, store=None, engine="serial", max_workers: int | None = None,
                        progress: bool | None = None) -> xr.Dataset:
    r"""Breakdown of the mean field from i.i.d. uniform tokens: a Dataset with dims (n_particles, seed, time).

    Theory (:mod:`metrics._statistics.horizon`, docs/theory.md): the degree amplitudes start at
    :math:`A_l(0) \approx \chi_{k_l}/\sqrt n` and grow like :math:`e^{\sigma_l t}`, so the amplitude of
    the most unstable degree :math:`l^*` reaches δ at

    .. math:: t_\delta \approx \frac{\log\delta + \tfrac12\log n - \log(\sqrt n A_{l^*}(0))}{\sigma^*},
       \qquad \frac{d\,E[t_\delta]}{d\log n} = \frac{1}{2\sigma^*}.

    Parameters
    ----------
    model : MultiHead
        Scalar heads (``MultiHead.scalar``), kind "usa" or "softmax", d = 2 or 3; its ``summation``
        (``"auto"`` by default) makes large n affordable.
    density : "uniform" or callable
        The initial law. ``"uniform"``: σ, an exact stationary solution, so the reference is σ itself and
        the linearised theory (t_δ on :math:`A_{l^*}`, its prediction, the law of Z, the slope
        :math:`1/(2\sigma^*)`) applies. A density ``density(points) -> (m,)`` (unnormalised, picklable
        for the process engine): tokens are drawn from it and measured against the spectral mean-field
        solution μ(t) (:class:`metrics.spectral_reference.StudyReference`: exponentially accurate, its
        error in the attrs); t_δ is then the first time the *distance* to μ(t) reaches δ, the slope is
        fitted on it, and the uniform-state predictions are NaN (they linearise about σ, not μ(t)).
    n_values : strictly increasing integers >= 2
    n_seeds : int or sequence of int
        Runs per n, or one count per n (t_δ spreads by O(1/σ*) across seeds: use many for the slope;
        the large-n runs cost the most and the fit weights each seed mean by its count). Seeds an n
        does not run are NaN in the Dataset; ``n_seeds_run`` holds the counts.
    t1, n_saves, dt : horizon, number of equally spaced save times in [0, t1], step (RK4 without
        noise, Euler–Maruyama with)
    delta : float > 0 or sequence of them
        Breakdown thresholds on :math:`A_{l^*}` and on the distance.
    kappa : float
        Noise (generator κ⁻¹Δ); below κ* the uniform state is stable and no breakdown is expected.
    l_max : int >= l*
        Degrees recorded.
    n_projections : directions of the sliced distance on S^2
    eps_cluster, max_clusters : geodesic linking distance; number of largest cluster masses kept
    n_boot : bootstrap resamples of the slope interval
    store, engine, max_workers, progress : passed to :func:`metrics.run_sweep` (resumable cells,
        "serial"/"process"/dask client, tqdm bar)

    Raises
    ------
    InvalidParameterError
        Bad input, ``delta`` not positive, or a save grid too coarse to resolve t_δ
        (σ*·Δt > 0.25, the growth of :math:`\log A_{l^*}` between two saves).

    Warns
    -----
    ResolutionWarning
        When a run has not broken down by t1 although σ* > 0 (its t_δ is ``inf``; raise t1).

    Examples
    --------
    >>> m = MultiHead.scalar([1.0], 2, beta=0.5, kind="softmax")
    >>> ds = chaos_horizon_study(m, n_values=[50, 100], n_seeds=2, t1=10.0, n_saves=41, delta=0.4,
    ...                          dt=0.1, n_boot=50)
    >>> ds.distance.dims, int(ds.l_star), bool(np.all(np.isfinite(ds.t_delta)))
    (('n_particles', 'seed', 'time'), 1, True)
    """
    caller = "chaos_horizon_study"
    n_seeds = seed_counts(n_seeds, n_values)
    deltas = np.atleast_1d(np.asarray(delta, dtype=float))
    sigma = mf.growth_rates(model, l_max=l_max, kappa=kappa)
    l_star = int(np.argmax(sigma[1:]) + 1)
    s_star = float(sigma[l_star])
    # a degree above l_max could still be the most unstable one: check up to twice further
    wider = mf.growth_rates(model, l_max=2 * l_max + 2, kappa=kappa)
    if np.argmax(wider[1:]) + 1 != l_star:
        raise InvalidParameterError(
            f"The 'l_max' parameter of {caller} must include the most unstable degree l* = "
            f"{int(np.argmax(wider[1:]) + 1)}; got l_max = {l_max}.")
    top, why = largest_breakdown_value(model.d, l_star, not callable(density))
    if np.any(deltas >= top):
        raise InvalidParameterError(
            f"The 'delta' parameter of {caller} must be below {top:.4g}, the largest value the breakdown quantity "
            f"can take ({why}); got {deltas.tolist()}. A larger delta is never reached: lower it.")
    ts = np.linspace(0.0, t1, n_saves)
    if s_star > 0 and s_star * (ts[1] - ts[0]) > MAX_LOG_STEP:
        need = int(np.ceil(s_star * t1 / MAX_LOG_STEP)) + 1
        raise InvalidParameterError(
            f"The time grid of {caller} is too coarse to resolve t_delta: sigma* dt_save = "
            f"{s_star * (ts[1] - ts[0]):.3g} > {MAX_LOG_STEP} (sigma* = {s_star:.4g}, t1 = {t1}, n_saves = "
            f"{n_saves}). Use n_saves >= {need}.")
    d, t_start = model.d, _time.perf_counter()
    reference, ref_attrs = _reference(model, density, ts, kappa=kappa, dt=dt, n_values=n_values, seed=seed,
                                      n_projections=n_projections, store=store, progress=progress)
    # one dict of the study's settings: what a cell reads (its key fields named by CHAOS.key) and what the
    # assembly reads
    settings = {"model": model, "ts": ts, "d": d, "t1": t1, "dt": dt, "kappa": kappa, "l_max": l_max,
                "eps_cluster": eps_cluster, "max_clusters": max_clusters, "n_projections": n_projections,
                "reference": reference, "deltas": deltas, "l_star": l_star, "s_star": s_star, "sigma": sigma,
                "n_values": n_values, "n_seeds": n_seeds, "n_saves": n_saves, "seed": seed, "n_boot": n_boot,
                "t_start": t_start, "uniform": isinstance(reference, UniformReference), "ref_attrs": ref_attrs,
                "density_key": density_key(probe_density(density, d, caller)) if callable(density) else None}
    sweep = CHAOS.run(model, n_values, n_seeds, settings, seed=seed, t1=t1, dt=dt, n_saves=n_saves, kappa=kappa,
                      engine=engine, max_workers=max_workers, store=store, progress=progress)
    return _assemble(sweep, model, settings)


def _reference(model, density, ts, *, kappa, dt, n_values, seed, n_projections, store, progress):
    """(reference object, its attrs): :class:`UniformReference` for "uniform", else the limit study's
    spectral reference of ``density`` (S^1: exact CDF; S^2: sliced against exact projected quantiles)."""
    if not callable(density):
        g = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        directions = g.standard_normal((int(n_projections), 3))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return UniformReference(model.d, directions), {
            "reference": "the uniform measure (exact stationary solution of the mean-field equation)",
            "distance_method": ("exact circle W1 closed form against 4 n quantile atoms of the uniform measure "
                                "(error 2 pi / (16 n))" if model.d == 2
                                else f"sliced SW_2 over {n_projections} directions, exact per direction")}
    from .reference import setup_reference

    try:
        ref = setup_reference(model, density, ts, dict(
            m_grid=4096, kappa=kappa, dt=dt, t1=float(ts[-1]), n_saves=len(ts), n_values=list(n_values),
            n_reference=None, seed=seed, n_projections=int(n_projections), n_quantiles=16384, transport="auto",
            w2_max_n=0, reference="spectral", store=store, progress=progress))
    except InvalidParameterError as exc:
        if "spectral" not in str(exc):
            raise
        raise InvalidParameterError(
            f"chaos_horizon_study measures a density start against the spectral mean-field solution up to t1 = "
            f"{float(ts[-1]):g}, which it cannot provide here ({exc}). Lower t1 to before the mean field "
            "concentrates into clusters, or add noise (kappa).") from None
    attrs = {k: v for k, v in ref["attrs"].items() if k.startswith("reference")}
    attrs["distance_method"] = next(iter(ref["transports"].values()))
    return ref["reference"], attrs


def _assemble(sweep, model, settings) -> xr.Dataset:
    ts, l_max, l_star, s_star = settings["ts"], settings["l_max"], settings["l_star"], settings["s_star"]
    n_values, d = settings["n_values"], settings["d"]
    dims = ("n_particles", "seed", "time")
    amp = np.stack([sweep[f"amplitude_{l}"].values for l in range(1, l_max + 1)], axis=-1)  # (N, S, T, L)
    dist = sweep["distance"].values
    b = breakdown(ts, amp, dist, settings)
    td, td_dist, pred, dominant, z, fits, ks, k, stable = (b[key] for key in ("td", "td_dist", "pred", "dominant", "z",
                                                                            "fits", "ks", "k", "stable"))
    sqrt_n = np.sqrt(np.asarray(n_values, float))[:, None]
    dunits = "rad" if d == 2 else "1"
    target = "uniform" if settings["uniform"] else "mu(t)"  # mu(t): the spectral mean-field solution
    dlong = (f"W1(mu_n(t), {target}), geodesic cost" if d == 2
             else f"sliced W2(mu_n(t), {target}) of the embedded measures")
    run = ("delta", "n_particles", "seed")
    data = {
        "distance": (dims, dist, {"long_name": dlong, "units": dunits}),
        "amplitude": (dims + ("degree",), amp, {"long_name": "degree amplitude A_l(mu_n(t)) (L2(sigma) norm over m)",
                                                "units": "1"}),
        **cluster_variables(sweep, int(settings["max_clusters"]), settings["eps_cluster"], settings["n_seeds"]),
        "growth_rate": (("degree",), np.asarray(settings["sigma"][1:], float),
                        {"long_name": "sigma_l of the uniform state (meanfield.growth_rates)",
                         "units": f"1/{TIME_UNITS}"}),
        "t_delta": (run, td, {"long_name": ("first time A_{l*}(t) >= delta" if settings["uniform"] else
                                            "first time the distance to mu(t) >= delta")
                                           + " (inf: not by t1; NaN: failed run or seed not run)",
                              "units": TIME_UNITS}),
        "t_delta_predicted": (run, pred, {"long_name": "linearised t_delta = log(delta / A_{l*}(0)) / sigma* "
                                                       "(inf: stable; NaN: started above delta)", "units": TIME_UNITS}),
        "t_delta_distance": (run, td_dist, {"long_name": "first time the distance to the mean field >= delta "
                                                         "(inf: not by t1)", "units": TIME_UNITS}),
        "dominant_mode": (run, dominant, {"long_name": "degree with the largest A_l at the first save >= t_delta "
                                                       "(0: no breakdown)", "units": "1"}),
        "horizon_z": (run, z, {"long_name": "sigma* t_delta - log(n)/2 - log(delta) (NaN: started above delta)",
                               "units": "1"}),
        "started_above_delta": (run, b["above"], {"long_name": "1 if the run started at or above delta (its t_delta "
                                                               "= 0 is no breakdown: prediction and Z masked)",
                                                  "units": "1"}),
        "horizon_z_law_mean": ((), breakdown_law_mean(k) if not stable and settings["uniform"] else np.nan,
                               {"long_name": f"E[Z] = -E[log chi_{k}] (NaN: stable, no breakdown law)", "units": "1"}),
        "law_ks_pvalue": (("delta",), ks, {"long_name": f"KS p-value of horizon_z (all runs) against -log chi_{k} "
                                                        "(NaN: stable)", "units": "1"}),
        "slope": (("delta",), fits[:, 0], {"long_name": "fitted d mean(t_delta) / d log n (NaN if a run did not "
                                                        "break down)", "units": TIME_UNITS}),
        "slope_ci": (("delta", "bound"), fits[:, 1:], {"long_name": "95% bootstrap interval (over seeds) of slope",
                                                       "units": TIME_UNITS}),
        "slope_predicted": ((), (1 / (2 * s_star) if not stable else np.inf) if settings["uniform"] else np.nan,
                            {"long_name": "1 / (2 sigma*) (inf: stable)", "units": TIME_UNITS}),
        "l_star": ((), l_star, {"long_name": "most unstable degree argmax_l sigma_l", "units": "1"}),
        "sigma_star": ((), s_star, {"long_name": "sigma_{l*}", "units": f"1/{TIME_UNITS}"}),
        "sup_scaled_distance": (dims[:-1], sqrt_n * np.max(dist, axis=-1),
                                {"long_name": "sup_t sqrt(n) distance(t)", "units": dunits}),
    }
    coords, attrs = _coords_and_attrs(model, settings, sweep)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _coords_and_attrs(model, settings, sweep) -> tuple[dict, dict]:
    """The study's coordinates (with ``degree`` and ``delta``) and attrs (the run's settings and its reference)."""
    coords = study_coords(settings["n_values"], settings["n_seeds"], settings["ts"], model.log_time_scale,
                          int(settings["max_clusters"]), "bootstrap quantile of the interval bound")
    coords["degree"] = ("degree", np.arange(1, settings["l_max"] + 1), {"long_name": "harmonic degree l", "units": "1"})
    coords["delta"] = ("delta", settings["deltas"], {"long_name": "breakdown threshold", "units": "1"})
    config = {k_: settings[k_] for k_ in ("n_values", "n_seeds", "t1", "n_saves", "dt", "kappa", "l_max", "seed",
                                          "n_projections", "eps_cluster", "max_clusters", "n_boot")}
    config["delta"] = settings["deltas"].tolist()
    attrs = study_attrs(CHAOS, title=f"headflow chaos horizon study on S^{settings['d'] - 1}", model=model,
                        sweep=sweep, config=config, seed=settings["seed"], spawn_key="(seed index, n)",
                        t_start=settings["t_start"], t1=settings["t1"], dt=settings["dt"], kappa=settings["kappa"],
                        n_saves=settings["n_saves"], **settings["ref_attrs"])
    return coords, attrs
