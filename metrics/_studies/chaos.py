r"""How long n tokens follow the mean field: the propagation-of-chaos horizon study.

The uniform measure σ is an exact stationary solution of the mean-field equation, so for i.i.d. uniform
tokens the reference is σ itself, in closed form (a density start is measured against the spectral
solution μ(t)). :func:`chaos_horizon_study` records per (n, seed) the distance to the mean field, the
degree amplitudes and the clusters at each save time; the breakdown analysis
(:mod:`metrics._studies.chaos_breakdown`) gives :math:`t_\delta`, its prediction, :math:`Z` and the slope
of :math:`t_\delta` against log n. Its settings are one table, :class:`ChaosSettings`.
"""

from __future__ import annotations

import time as _time
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import partial
from types import SimpleNamespace

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead
from particles.validation import (
    AnyOf,
    Function,
    Integer,
    InvalidParameterError,
    Options,
    SequenceOf,
)

from .._observables.clustering import cluster_row
from .._observables.harmonics import harmonic_amplitudes
from .._runs import params as P
from .._runs.keys import study_density_key
from . import spec as kit
from .chaos_breakdown import breakdown_variables, check_resolution
from .reference import UniformReference, setup_reference

__all__ = ["chaos_horizon_study", "ChaosSettings"]



@dataclass(frozen=True)
class ChaosSettings(kit.StudySettings):
    """The chaos study's settings, one table: each field's rule, default and name in the cells' key (the
    public function's parameters derive from it); then what the study derives before its cells."""

    model: MultiHead = kit.setting(P.mean_field_model((1, 2), "Build it with MultiHead.scalar([lam], d, beta=..., "
                                                              "kind=...)."), key=True)
    density: object = kit.setting(AnyOf(Options("uniform"), Function("a density function density(points) -> (m,) "
                                                                     "on the sphere")), "uniform", cells=False)
    _: KW_ONLY
    n_values: tuple = kit.setting(SequenceOf(Integer(2), min_len=2, increasing=True, hint="The slope is fitted "
                                             "against log n: pass at least two increasing n >= 2."), (100, 1000, 10000))
    n_seeds: int = kit.setting(P.N_SEEDS, 8)
    t1: float = kit.setting(P.T1, 12.0, attr=True)
    n_saves: int = kit.setting(P.N_SAVES, 241, attr=True)
    delta: tuple = kit.setting(AnyOf(P.POSITIVE, SequenceOf(P.POSITIVE), hint="Use e.g. delta=0.1 (a "
                                     "breakdown is a distance or amplitude reaching delta)."), (0.05, 0.1))
    kappa: float = kit.setting(P.KAPPA, np.inf, attr=True)
    l_max: int = kit.setting(Integer(1), 6, key=True)
    dt: float = kit.setting(P.DT, 0.05, attr=True)
    seed: int = kit.setting(P.SEED, 0)
    n_projections: int = kit.setting(P.N_PROJECTIONS, 64, key="L")
    eps_cluster: float = kit.setting(P.EPS_CLUSTER, 1e-2, key="eps")
    max_clusters: int = kit.setting(P.MAX_CLUSTERS, 8, key="K")
    n_boot: int = kit.setting(P.N_BOOT, 1000)
    # derived: the growth rates of the uniform state, the reference the cells measure against, the density's key
    sigma: np.ndarray = field(default=None, compare=False, repr=False)
    l_star: int = 1
    mean_field: object = field(default=None, compare=False, repr=False)
    reference_attrs: dict = field(default=None, compare=False, repr=False)
    density_key: str = ""

    RELATIONS = (P.DT_LE_T1, P.STEPS_WITHIN, P.SEEDS_PER_N)

    @property
    def deltas(self) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.delta, dtype=float))

    @property
    def uniform(self) -> bool:  # (read by the study, not its cells, which receive no density)
        return not callable(self.density)

    @property
    def s_star(self) -> float:
        return float(self.sigma[self.l_star])


def _chaos_cell(params: dict, seed_index: int, s: ChaosSettings, entropy: int) -> xr.Dataset:
    """One (n, seed) run from i.i.d. tokens of the reference's initial law, with run_sweep's cell
    contract (dims ``time``); the distance is to the reference's μ(t_k) at each save."""
    n, ts = int(params["n_particles"]), s.ts
    # independent draws per (seed, n): the fit's bootstrap resamples the seeds of each n separately
    rng_init, rng_noise = kit.cell_rngs(entropy, seed_index, n)
    x0 = s.mean_field.sample(n, rng_init)
    distance, name = s.mean_field.distances(n), "w1" if s.model.d == 2 else "sw2"

    def save_fn(t, x):
        row = {"distance": distance(x, int(np.argmin(np.abs(ts - t))))[name]}
        for l, a in enumerate(harmonic_amplitudes(x, s.l_max)[1:], start=1):
            row[f"amplitude_{l}"] = a
        row.update(cluster_row(x, eps=s.eps_cluster, max_clusters=s.max_clusters))
        return row

    return kit.run_cell(x0, s, save_fn, rng_noise)


def _chaos_key(s: ChaosSettings, legacy: bool = False) -> dict:
    """Key of a chaos cell, from the configuration alone: format 1 for the uniform start, format 2 for a
    density start (the density by :func:`metrics._runs.keys.study_density_key` on the reference's grid).
    ``legacy``: format 1 everywhere (the reference's energies, the model's attrs as they are), whose stores
    are migrated where it differs."""
    if s.uniform:
        density = {}
    elif legacy:
        density = {"density": np.asarray(s.mean_field.energy).tolist()}
    else:
        density = {"density": s.density_key, "key_version": 2}
    return {"study": CHAOS.name, **s.key(legacy), "spawn_key": "(seed index, n)", **density}


_chaos_key_v1 = partial(_chaos_key, legacy=True)

#: the grid of a density start's spectral reference (cells on S^1, the bound grid on S^2)
_M_GRID = 4096


CHAOS = kit.Study(name="chaos_horizon_study", kind="chaos", label="chaos study", cell=_chaos_cell, key=_chaos_key,
                  legacy_key=_chaos_key_v1)


@kit.study_function(ChaosSettings)
def chaos_horizon_study(s: ChaosSettings, **run) -> xr.Dataset:
    r"""Breakdown of the mean field from i.i.d. uniform tokens: a Dataset with dims (n_particles, seed, time).

    Theory (:mod:`metrics._statistics.horizon`, docs/theory.md): the degree amplitudes start at
    :math:`A_l(0) \approx \chi_{k_l}/\sqrt n` and grow like :math:`e^{\sigma_l t}`, so the amplitude of
    the most unstable degree :math:`l^*` reaches δ at

    .. math:: t_\delta \approx \frac{\log\delta + \tfrac12\log n - \log(\sqrt n A_{l^*}(0))}{\sigma^*},
       \qquad \frac{d\,E[t_\delta]}{d\log n} = \frac{1}{2\sigma^*}.

    Parameters
    ----------
    model : MultiHead
        Scalar heads (``MultiHead.scalar``), kind "usa" or "softmax", d = 2 or 3.
    density : "uniform" or callable
        ``"uniform"``: σ, so the linearised theory (t_δ on :math:`A_{l^*}`, its prediction, the law of
        Z, the slope :math:`1/(2\sigma^*)`) applies. A density ``density(points) -> (m,)``: tokens are
        drawn from it and measured against the spectral solution μ(t)
        (:class:`metrics.spectral_reference.StudyReference`); t_δ is then the first time the distance
        to μ(t) reaches δ, and the uniform-state predictions are NaN.
    n_values, n_seeds : strictly increasing n >= 2; runs per n, or one count per n (t_δ spreads by
        O(1/σ*) across seeds: use many for the slope). Seeds an n does not run are NaN.
    t1, n_saves, dt : horizon, save times in [0, t1], step (RK4 without noise, Euler–Maruyama with)
    delta : breakdown threshold(s) > 0 on :math:`A_{l^*}` and on the distance
    kappa : noise (generator κ⁻¹Δ); below κ* the uniform state is stable and no breakdown is expected
    l_max : degrees recorded (>= l*)
    n_projections : directions of the sliced distance on S^2
    eps_cluster, max_clusters : geodesic linking distance; number of largest cluster masses kept
    n_boot : bootstrap resamples of the slope interval
    store, engine, max_workers, progress : as in :func:`metrics.run_sweep`

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
    >>> m = MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    >>> ds = chaos_horizon_study(m, n_values=[50, 100], n_seeds=2, t1=10.0, n_saves=41, delta=0.4,
    ...                          dt=0.1, n_boot=50)
    >>> ds.distance.dims, int(ds.l_star), bool(np.all(np.isfinite(ds.t_delta)))
    (('n_particles', 'seed', 'time'), 1, True)
    """
    t_start = _time.perf_counter()
    sigma = mf.growth_rates(s.model, l_max=s.l_max, kappa=s.kappa)
    s = replace(s, sigma=sigma, l_star=int(np.argmax(sigma[1:]) + 1))
    check_resolution(s, CHAOS.name)
    reference, ref_attrs = _reference(s, run["store"], run["progress"])
    s = replace(s, mean_field=reference, reference_attrs=ref_attrs,
                density_key="" if s.uniform else study_density_key(s.density, s.model.d, _M_GRID, CHAOS.name))
    return _assemble(CHAOS.run(s, **run), s, t_start)


def _reference(s: ChaosSettings, store, progress):
    """(reference object, its attrs): :class:`UniformReference` for "uniform", else the limit study's
    spectral reference of the density (S^1: exact CDF; S^2: sliced against exact projected quantiles)."""
    if s.uniform:
        g = np.random.default_rng(np.random.SeedSequence(s.seed).spawn(1)[0])
        directions = g.standard_normal((s.n_projections, 3))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return UniformReference(s.model.d, directions), {
            "reference": "the uniform measure (exact stationary solution of the mean-field equation)",
            "distance_method": ("exact circle W1 closed form against 4 n quantile atoms of the uniform measure "
                                "(error 2 pi / (16 n))" if s.model.d == 2
                                else f"sliced SW_2 over {s.n_projections} directions, exact per direction")}
    try:  # the limit study's reference, with the chaos study's own grid and quantiles, always spectral
        ref = setup_reference(SimpleNamespace(**vars(s), density_fn=s.density, ts=s.ts, m_grid=_M_GRID,
                                              n_reference=None, n_quantiles=16384, transport="auto", w2_max_n=0,
                                              reference="spectral"),
                              store=store, progress=progress)
    except InvalidParameterError as exc:
        if "spectral" not in str(exc):
            raise
        raise InvalidParameterError(
            f"chaos_horizon_study measures a density start against the spectral mean-field solution up to t1 = "
            f"{s.t1:g}, which it cannot provide here ({exc}). Lower t1 to before the mean field "
            "concentrates into clusters, or add noise (kappa).") from None
    return ref["reference"], {**{k: v for k, v in ref["attrs"].items() if k.startswith("reference")},
                              "distance_method": next(iter(ref["transports"].values()))}


def _assemble(sweep, s: ChaosSettings, t_start: float) -> xr.Dataset:
    ts, l_max, d = s.ts, s.l_max, s.model.d
    dims = ("n_particles", "seed", "time")
    amp = np.stack([sweep[f"amplitude_{l}"].values for l in range(1, l_max + 1)], axis=-1)  # (N, S, T, L)
    dist = sweep["distance"].values
    dunits = "rad" if d == 2 else "1"
    target = "uniform" if s.uniform else "mu(t)"  # mu(t): the spectral mean-field solution
    dlong = (f"W1(mu_n(t), {target}), geodesic cost" if d == 2
             else f"sliced W2(mu_n(t), {target}) of the embedded measures")
    data = {
        "distance": (dims, dist, {"long_name": dlong, "units": dunits}),
        "amplitude": (dims + ("degree",), amp, {"long_name": "degree amplitude A_l(mu_n(t)) (L2(sigma) norm over m)",
                                                "units": "1"}),
        **kit.cluster_variables(sweep, max_clusters=s.max_clusters, eps=s.eps_cluster, counts=s.counts),
        **breakdown_variables(ts, amp, dist, s),
        "sup_scaled_distance": (dims[:-1], np.sqrt(np.asarray(s.n_values, float))[:, None] * np.max(dist, axis=-1),
                                {"long_name": "sup_t sqrt(n) distance(t)", "units": dunits}),
    }
    coords = kit.study_coords(s.n_values, s.counts, ts, log_time_scale=s.model.log_time_scale,
                              max_clusters=s.max_clusters, bound="bootstrap quantile of the interval bound")
    coords["degree"] = ("degree", np.arange(1, l_max + 1), {"long_name": "harmonic degree l", "units": "1"})
    coords["delta"] = ("delta", s.deltas, {"long_name": "breakdown threshold", "units": "1"})
    attrs = kit.study_attrs(CHAOS, s, title=f"headflow chaos horizon study on S^{d - 1}", sweep=sweep,
                            spawn_key="(seed index, n)", t_start=t_start, **s.reference_attrs)
    return xr.Dataset(data, coords=coords, attrs=attrs)
