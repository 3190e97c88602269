r"""The n → ∞ study: particle systems against the mean-field solution from the same law.

:func:`mean_field_limit_study` solves the mean-field equation once (:mod:`metrics._studies.reference`), then,
one resumable cell per (n, seed), draws n i.i.d. tokens from the same law, runs the particle flow and
measures at each save time the distance to μ(t) (exact :math:`W_1, W_2` on S^1, the sliced :math:`SW_2`
of the embedded measures on S^{d-1}), the energy and attention-entropy gaps and the clusters; it fits
the rates :math:`g \sim n^{r}` with calibrated intervals (:func:`metrics.fit_rate`). Theory
(docs/theory.md §6): :math:`W(\mu_n(0), \mu(0)) \sim n^{-1/2}`, and the gap grows at most like
:math:`e^{Lt}` after. Its settings are one table, :class:`LimitSettings`.
"""

from __future__ import annotations

import json
import time as _time
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import partial

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead
from particles.validation import NONE, AnyOf, Function, Integer, Options, Relation

from .._observables.clustering import cluster_row
from .._runs import params as P
from .._runs.keys import study_density_key
from .._statistics.rates import rate_interval_note, rate_variables
from . import spec as kit
from .reference import measure_entropy, sample_grid_measure, setup_reference

__all__ = ["mean_field_limit_study", "sample_grid_measure", "measure_entropy", "LimitSettings"]


@dataclass(frozen=True)
class LimitSettings(kit.StudySettings):
    """The limit study's settings, one table: each field's rule, default and name in the cells' key
    (the public function's parameters derive from it); then what the study derives before its cells."""

    model: MultiHead = kit.setting(P.MEAN_FIELD_MODEL, key=True)
    density_fn: object = kit.setting(Function("a density function density_fn(points) -> (m,) on the sphere"),
                                     cells=False)
    _: KW_ONLY
    n_values: tuple = kit.setting(P.N_VALUES, (16, 32, 64, 128, 256))
    n_seeds: int = kit.setting(P.N_SEEDS, 4)
    t1: float = kit.setting(P.T1, 2.0, key=True, attr=True)
    n_saves: int = kit.setting(P.N_SAVES, 5, key=True)
    m_grid: int = kit.setting(Integer(8, hint="The S^1 grid has m_grid cells, e.g. 1024."), 1024, key=True, attr=True)
    dt: float = kit.setting(P.DT, 0.01, key=True, attr=True)
    seed: int = kit.setting(P.SEED, 0)
    kappa: float = kit.setting(P.KAPPA, np.inf, key=True, attr=True)
    n_reference: int | None = kit.setting(AnyOf(NONE, Integer(2)), None, key=True)
    transport: str = kit.setting(Options("auto", "emd2", "circle"), "auto", key=True)
    n_projections: int = kit.setting(P.N_PROJECTIONS, 256, key="L")
    n_quantiles: int = kit.setting(Integer(2), 16384, key="Q")
    w2_max_n: int = kit.setting(Integer(1), 100_000, key=True)
    eps_cluster: float = kit.setting(P.EPS_CLUSTER, 1e-3, key="eps")
    max_clusters: int = kit.setting(P.MAX_CLUSTERS, 8, key="K")
    sampling: str = kit.setting(Options("independent", "nested"), "independent", key=True, attr=True)
    interval: str = kit.setting(Options("t", "bootstrap"), "t")
    n_boot: int = kit.setting(P.N_BOOT, 2000)
    reference: str = kit.setting(Options("auto", "spectral", "fv_circle", "lagrangian"), "auto")
    # derived: the mean-field reference the cells measure against, its name, the density's key
    mean_field: object = field(default=None, compare=False, repr=False)
    reference_name: str = field(default="", metadata={"key": "reference"})
    density_key: str = field(default="", metadata={"key": "density"})

    RELATIONS = (
        P.DT_LE_T1, P.STEPS_WITHIN, P.SEEDS_PER_N,
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
    """One (n, seed) particle run of the study (run_sweep loads, stamps and writes the cells)."""
    n, ref, ts = int(params["n_particles"]), s.mean_field, s.ts
    # independent: every (n, seed) cell has its own stream; nested: seed s of every n shares one
    # stream, so the sample of n is a prefix-like subset of the sample of a larger n
    rng_init, rng_noise = kit.cell_rngs(entropy, *((seed_index,) if s.sampling == "nested" else (seed_index, n)))
    x0, distances = ref.sample(n, rng_init), ref.distances(n)

    def save_fn(t, x):
        k = int(np.argmin(np.abs(ts - t)))
        row = distances(x, k)
        row["energy_gap"] = abs(mf.measure_energy(s.model, x) - ref.energy[k])
        row["entropy_gap"] = abs(measure_entropy(s.model, x) - ref.entropy[k])
        row.update(cluster_row(x, eps=s.eps_cluster, max_clusters=s.max_clusters))
        return row

    return kit.run_cell(x0, s, save_fn, rng_noise)


def _limit_key(s: LimitSettings, legacy: bool = False) -> dict:
    """Key format 2 of a limit-study cell: the settings' key fields, from the configuration alone (the
    density by its values on the reference's grid, :func:`metrics._runs.keys.study_density_key`; the sliced
    directions on d >= 3). ``legacy``: format 1, the density through the reference's energies and the
    model's fields as they are (stores written before format 2 are migrated)."""
    key = s.key(legacy)
    if legacy:
        key["density"] = np.asarray(s.mean_field.energy).tolist()
    if s.model.d >= 3:
        key["sliced"] = s.mean_field.sliced.representation
    return key


_limit_key_v1 = partial(_limit_key, legacy=True)

LIMIT = kit.Study(name="mean_field_limit_study", kind="study", label="S^{sphere} study", cell=_study_cell,
                  key=_limit_key, key_version=2, legacy_key=_limit_key_v1)


@kit.study_function(LimitSettings)
def mean_field_limit_study(s: LimitSettings, **run) -> xr.Dataset:
    r"""Run the study and return a Dataset with dims (n_particles, seed, time).

    Parameters
    ----------
    model : MultiHead
        Kind "usa" or "softmax", any number of heads; noise ``kappa`` (inverse temperature of the
        Brownian part, np.inf: none) is allowed.
    density_fn : callable
        Unnormalised initial density ``density_fn(points)`` of points (m, d) on S^{d-1} (on S^1 a
        function of the angle through :func:`metrics.density_of_angle`; :func:`metrics.check_density_fn`).
    n_values, n_seeds : strictly increasing n; seeds per n, or one count per n (independent sampling;
        e.g. ``(40, 40, 20, 10, 5)``: small n are cheap). Seeds an n does not run are NaN.
    t1, n_saves, dt : horizon, save times in [0, t1], RK4 step of the particle runs
    m_grid : cells of the S^1 grid (W_p error ≤ 2π/m_grid), or the grid bounding the density on d ≥ 3
    n_reference : particles of a Lagrangian reference (default 16·max(n_values))
    transport : {"auto", "emd2", "circle"}; S^1 method of :func:`metrics.circle_wasserstein`
    w2_max_n : largest n with W2 on S^1 (seconds per call at n = 10^5); beyond it ``w2`` is NaN
    n_projections, n_quantiles : directions of the sliced SW_2 and quantile nodes per projected
        reference (d ≥ 3, :class:`metrics.SlicedReference`)
    eps_cluster, max_clusters : geodesic linking distance (rad) and cluster masses kept
    sampling : {"independent", "nested"}
        "independent": every (n, seed) cell draws its own sample (``spawn_key=(seed index, n)``);
        "nested": seed s shares one stream across n (``spawn_key=(seed index,)``), intervals paired.
    interval, n_boot : rate intervals of :func:`metrics.fit_rate`, "t" (delta method, calibrated) or
        "bootstrap" over seeds, with its resamples
    store, engine, max_workers, progress
        As in :func:`metrics.run_sweep`: one file per finished cell (resumable), "serial",
        "process" or a dask client, the bars. A finite-volume or Lagrangian reference is kept in
        ``store`` too (``reference_<hash>.nc``, attrs ``reference_cached``, ``reference_file``).
    reference : {"auto", "spectral", "fv_circle", "lagrangian"}
        "auto": the spectral solution (:class:`metrics.spectral_reference.StudyReference`) where it
        applies (S^1 with scaled-rotation heads; S^2; d ≥ 4 with scalar heads and a density zonal
        about the last axis), else ``fv_circle`` on S^1 and two Lagrangian runs on S^{d-1}.
    """
    t_start = _time.perf_counter()
    density_id = study_density_key(s.density_fn, s.model.d, s.m_grid, LIMIT.name)  # (also checks the density)
    # the cells on S^{d-1} sample from density_fn in the workers: refuse before the reference runs
    kit.check_process_engine(LIMIT.name, run["engine"], **({"density_fn": s.density_fn} if s.model.d >= 3 else {}))
    ref = setup_reference(s, store=run["store"], progress=run["progress"])
    t_ref = _time.perf_counter() - t_start
    s = replace(s, mean_field=ref["reference"], reference_name=ref["name"], density_key=density_id)
    sweep = LIMIT.run(s, **run)
    d, paired, counts = s.model.d, s.sampling == "nested", np.asarray(s.counts)
    ds = xr.Dataset(_study_data(sweep, ref, s, counts),
                    coords=kit.study_coords(s.n_values, counts, s.ts, log_time_scale=s.model.log_time_scale,
                                            max_clusters=s.max_clusters,
                                            bound="probability level of the interval bound"))
    main_w = "w1" if d == 2 else "sw2"
    ds.attrs = kit.study_attrs(
        LIMIT, s, title=f"headflow mean-field limit study on S^{d - 1}", sweep=sweep, t_start=t_start,
        spawn_key="(seed index,)" if paired else "(seed index, n)", rate_metric=main_w,
        rate_at_t0=float(ds[f"rate_{main_w}"].isel(time=0)),
        rate_at_t0_ci=ds[f"rate_{main_w}_ci"].isel(time=0).values.tolist(),
        rate_interval=rate_interval_note(s.interval, paired),
        transport_method=json.dumps(ref["transports"]), **ref["notes"], reference_seconds=float(t_ref), **ref["attrs"])
    return ds


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
    data.update(kit.cluster_variables(sweep, max_clusters=s.max_clusters, eps=s.eps_cluster, counts=counts))
    if s.model.d >= 3:
        data["reference_error"] = (("time",), ref["error_t"], {"long_name": ref["error_t_long"], "units": "1"})
    data["energy_meanfield"] = (("time",), np.asarray(s.mean_field.energy),
                                {"long_name": "mean-field energy E_multi[mu(t)]", "units": "1"})
    data["entropy_meanfield"] = (("time",), np.asarray(s.mean_field.entropy),
                                 {"long_name": "mean-field attention entropy H[mu(t)] (nats)", "units": "1"})
    for v in s.mean_field.rated:
        data.update(rate_variables(v, sweep[v].values, s.n_values, counts, paired=s.sampling == "nested",
                                   interval=s.interval, n_boot=s.n_boot, rng=s.seed, units=units.get(v, "1"),
                                   partial=v == "w2"))  # W2 is skipped above w2_max_n
    return data
