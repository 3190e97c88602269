"""The mean-field reference of a limit study: spectral where it applies, else finite volumes on
S^1 or two Lagrangian runs on S^{d-1}, cached in the study's store (keyed by every setting it
depends on). :func:`setup_reference` returns what the study's cells and dataset need."""

from __future__ import annotations

import json
import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead, SaveAt, __version__, simulate, tqdm_class
from particles.validation import InvalidParameterError, check_param

from .._data.dataset import time_coord
from .._data.provenance import model_attrs
from .._observables.density import bound_grid, probe_density, sample_sphere_density
from .._observables.harmonics import sliced_w2_to_uniform_s2
from .._observables.reference_transport import SlicedReference, circle_quantile_atoms, circle_wasserstein
from .._runs.keys import density_key
from .._runs.progress import progress_step
from .._runs.store import atomic_to_netcdf, migrate_reference, read_reference, reference_path
from .spec import particle_method

__all__ = ["setup_reference", "measure_entropy", "sample_grid_measure", "CircleReference", "SphereReference",
           "UniformReference"]


def sample_grid_measure(mu: mf.GridMeasure, n: int, rng) -> np.ndarray:
    """n i.i.d. points on S^1 from a circle-grid measure: a cell by its mass, then uniform in it."""
    m = len(mu.mass)
    rng = np.random.default_rng(rng)
    k = rng.choice(m, size=n, p=mu.mass)
    theta = (k + rng.uniform(size=n)) * 2 * np.pi / m
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def _grid_atoms(masses, k, M):
    return circle_quantile_atoms(masses[k], M)


def _spectral_atoms(solution, k, M):
    from .spectral_reference import circle_spectral_quantiles

    return circle_spectral_quantiles(solution, k, M=M)[0]


def _spectral_sample(solution, n, rng):
    from .spectral_reference import circle_spectral_sample

    return circle_spectral_sample(solution, 0, n=n, rng=rng)


@dataclass(frozen=True, eq=False)
class CircleReference:
    """μ(t) on S^1 as a study cell uses it: ``sample(n, rng)`` draws μ(0), ``distances(n)`` returns
    ``fn(x, k) -> {"w1", "w2"}``, the exact W_p (geodesic cost) between the tokens and μ(t_k) through its
    M = max(4n, 4 m_grid) quantile atoms (``atoms(k, M)``), and ``energy``/``entropy`` are E and H of μ(t_k)."""

    sample: Callable
    atoms: Callable
    m_grid: int
    energy: np.ndarray
    entropy: np.ndarray
    transport: str
    w2_max_n: int
    rated = ("w1", "w2", "energy_gap", "entropy_gap")

    def distances(self, n: int) -> Callable:
        M = max(4 * n, 4 * self.m_grid)
        atoms = [self.atoms(k, M) for k in range(len(self.energy))]
        w2 = n <= self.w2_max_n

        def fn(x, k):
            theta = np.arctan2(x[:, 1], x[:, 0])
            return {"w1": circle_wasserstein(theta, atoms[k], p=1, method=self.transport)[0],
                    "w2": circle_wasserstein(theta, atoms[k], p=2, method=self.transport)[0] if w2 else np.nan}

        return fn


@dataclass(frozen=True, eq=False)
class SphereReference:
    """μ(t) on S^{d-1}, d ≥ 3, as a study cell uses it: ``sample(n, rng)`` draws the density by
    rejection (``bound`` ≥ its maximum), ``distances(n)`` returns ``fn(x, k) -> {"sw2", "sw2_mc_error"}``
    against the reference's projected quantiles (``sliced``), ``energy``/``entropy`` as on S^1."""

    density_fn: Callable
    d: int
    bound: float
    sliced: object
    energy: np.ndarray
    entropy: np.ndarray
    rated = ("sw2", "energy_gap", "entropy_gap")

    def sample(self, n: int, rng) -> np.ndarray:
        return sample_sphere_density(self.density_fn, n, d=self.d, rng=rng, bound=self.bound)

    def distances(self, n: int) -> Callable:
        return lambda x, k: dict(zip(("sw2", "sw2_mc_error"), self.sliced(x, k)))


def _uniform_tokens(n, d, rng):
    if d == 2:
        theta = rng.uniform(0.0, 2 * np.pi, n)
        return np.stack([np.cos(theta), np.sin(theta)], axis=1)
    y = rng.standard_normal((n, d))
    return y / np.linalg.norm(y, axis=1, keepdims=True)


@dataclass(frozen=True, eq=False)
class UniformReference:
    """The uniform measure σ on S^1 or S^2 as a study cell uses a reference (the interface of
    :class:`metrics._studies.reference.CircleReference`): ``sample(n, rng)`` draws σ, ``distances(n)``
    returns ``fn(x, k) -> {"w1"}`` (exact circle W1 against 4n quantile atoms of σ, error 2π/(16n))
    or ``{"sw2"}`` (sliced SW2 over ``directions``, exact per direction); σ is stationary, so k is unused."""

    d: int
    directions: np.ndarray

    def sample(self, n: int, rng) -> np.ndarray:
        return _uniform_tokens(n, self.d, rng)

    def distances(self, n: int):
        if self.d == 2:
            atoms = circle_quantile_atoms(np.ones(1), 4 * n)
            return lambda x, k: {"w1": circle_wasserstein(np.arctan2(x[:, 1], x[:, 0]), atoms, p=1,
                                                          method="circle")[0]}
        return lambda x, k: {"sw2": sliced_w2_to_uniform_s2(x, self.directions)}


def measure_entropy(model: MultiHead, y: np.ndarray, w: np.ndarray | None = None) -> float:
    r"""Head-averaged attention entropy of a measure,
    :math:`\bar H[\mu] = \frac1H\sum_h\int(\log Z^h_\mu(x) - \beta\langle x, M_h m^h_\mu(x)\rangle)\,d\mu(x)`,
    :math:`Z^h_\mu(x) = \int e^{\beta\langle x, M_h y\rangle}d\mu(y)`; for :math:`\mu_n` it is the
    particle attention entropy minus :math:`\log n`."""
    w = np.full(len(y), 1.0 / len(y)) if w is None else np.asarray(w, dtype=np.float64)
    keep = w > 0
    y, w = y[keep], w[keep] / w[keep].sum()
    # the model's own entropy of weighted sums (unclipped: H - log n for w = 1/n); y may lie off a grid's sphere
    ent = model.entropy(y, model.sums(y, sources=y, weights=w, check=False), clip=False)
    return float(w @ ent.mean(axis=0))


def setup_reference(settings, *, store, progress) -> dict:
    """``{"reference", "name", "attrs", "transports", "notes", "note", "error_t"}`` of the study's reference on
    the sphere of ``settings.model`` (``settings``: the study's, with the fields the reference reads: its model,
    density_fn, ts, t1, dt, n_saves, kappa, m_grid, n_values, n_reference, seed, n_projections, n_quantiles,
    transport, w2_max_n and reference); ``reference`` is a :class:`CircleReference` or a :class:`SphereReference`."""
    opts = {**vars(settings), "ts": settings.ts, "store": store, "progress": progress}
    with progress_step(progress, "reference"):
        out = (_circle if settings.model.d == 2 else _sphere)(**opts)
    if out["note"]:  # why the spectral reference was not used
        out["attrs"] = {**out["attrs"], "reference_note": out["note"]}
    return {**out, "name": out["attrs"]["reference"], "notes": _METHOD_NOTES[min(settings.model.d, 3)]}


#: how the study measures, per sphere (S^1: 2; S^{d-1}, d >= 3: 3)
_METHOD_NOTES = {
    2: {"transport_note": "S^1: exact W_p against M = max(4n, 4 m_grid) quantile atoms of the reference; the "
                          "emd2 and circle methods compute the same number",
        "clustering": "exact geodesic eps-linking (metrics.cluster_sizes): sorted angles, O(n log n)"},
    3: {"transport_note": "S^{d-1}: sliced SW_2 of the embedded measures, a metric with the same n^{-1/2} rate as "
                          "W_2 for i.i.d. samples (metrics.limit); sw2_mc_error is its Monte-Carlo standard error",
        "clustering": "exact geodesic eps-linking (metrics.cluster_sizes): grid cubes and KD-trees, O(n d) memory"},
}


def _circle(*, model, density_fn, ts, m_grid, kappa, t1, n_saves, n_values, n_projections, n_quantiles, seed,
            transport, w2_max_n, reference, store, **_):
    """The S^1 reference: spectral when it applies, else finite volumes on m_grid cells (cached)."""
    pts, areas = mf.circle_grid(int(m_grid))
    rho_grid = probe_density(density_fn, 2, "mean_field_limit_study", points=pts)
    mu0 = mf.GridMeasure.from_density(pts, areas, density_fn)
    spec, note = _spectral_reference(reference, model, density_fn, ts, kappa, m_grid, n_projections, n_quantiles,
                                     seed)
    if spec is not None:
        reference = CircleReference(partial(_spectral_sample, spec.solution), partial(_spectral_atoms, spec.solution),
                                    int(m_grid), spec.energy, spec.entropy, transport, w2_max_n)
        ref_attrs = spec.attrs
    else:
        ref_key = {"model": model_attrs(model), "t1": float(t1), "n_saves": int(n_saves), "kappa": float(kappa),
                   "m_grid": int(m_grid), "scheme": "fv_circle", "version": __version__,
                   "density_on_grid": density_key(rho_grid)}

        def build():
            sol = mf.wasserstein_ascent(mu0, model, t1=float(t1), n_saves=int(n_saves), scheme="fv_circle",
                                        kappa=kappa)
            return {"mass": np.asarray(sol.mass), "energy": np.asarray(sol.energy),
                    "entropy": np.array([measure_entropy(model, pts, q) for q in sol.mass])}

        ref_key = migrate_reference(ref_key, rho_grid, store)
        ref = _cached_reference(ref_key, ts, store, build, {"mass": ("time", "cell")}, model.log_time_scale)
        reference = CircleReference(partial(sample_grid_measure, mu0), partial(_grid_atoms, ref["mass"]), int(m_grid),
                                    ref["energy"], ref["entropy"], transport, w2_max_n)
        ref_err = 2 * np.pi / (4 * int(m_grid))  # quantile-atom error; the FV error is O(1/m_grid) on top
        ref_attrs = {"reference": "meanfield.wasserstein_ascent(scheme='fv_circle')",
                     "reference_cells": int(m_grid), "reference_error": 2 * np.pi / int(m_grid),
                     "reference_error_note": "bound 2*pi/m_grid on W_p between the grid measure and mu "
                                             "(cell width); quantile-atom error 2*pi/M <= "
                                             f"{ref_err:.2e} on top",
                     "reference_build_seconds": ref["seconds"], "reference_cached": int(ref["cached"]),
                     "reference_file": ref["file"]}
    transports = {str(n): ("ot.emd2" if transport == "emd2"
                           else "W1: circle closed form; W2: ot.binary_search_circle"
                           + ("" if n <= w2_max_n else " (W2 skipped: n > w2_max_n)"))
                  for n in n_values}
    return {"reference": reference, "attrs": ref_attrs, "transports": transports, "note": note, "error_t": None}


def _sphere(*, model, density_fn, ts, m_grid, kappa, dt, t1, n_saves, n_values, n_reference, seed, n_projections,
            n_quantiles, reference, store, progress, **_):
    d = model.d
    # (the grid is on S^{d-1}: a Fibonacci lattice on S^2 read 3 columns where d >= 4 needs d)
    rho_grid = probe_density(density_fn, d, "mean_field_limit_study", points=bound_grid(d, int(m_grid)))
    bound = 1.5 * float(rho_grid.max())
    spec, note = _spectral_reference(reference, model, density_fn, ts, kappa, m_grid, n_projections, n_quantiles,
                                     seed)
    if spec is not None:
        sliced = spec.sliced
        reference = SphereReference(density_fn, d, bound, sliced, spec.energy, spec.entropy)
        ref_error_t = sliced.error + 2 * np.sqrt(spec.attrs["reference_tail"])
        ref_attrs = spec.attrs
    else:
        if n_reference is not None:
            # a reference coarser than the runs it measures would make its own error the result
            check_param(n_reference, "n_reference", "mean_field_limit_study", low=max(n_values), integer=True)
        n_ref = int(n_reference or 16 * max(n_values))
        ref_key = {"model": model_attrs(model), "t1": float(t1), "dt": float(dt), "n_saves": int(n_saves),
                   "kappa": float(kappa), "n_reference": n_ref, "seed": seed, "m_grid": int(m_grid),
                   "n_projections": int(n_projections), "n_quantiles": int(n_quantiles), "version": __version__,
                   "density_on_grid": density_key(rho_grid)}
        ref = _sphere_reference(model, density_fn, migrate_reference(ref_key, rho_grid, store), ts, bound, store,
                                progress)
        sliced = SlicedReference(ref["positions"], n_projections=int(n_projections), n_quantiles=int(n_quantiles),
                                 seed=seed)
        reference = SphereReference(density_fn, d, bound, sliced, ref["energy"], ref["entropy"])
        ref_error_t = ref["own_sw2"] / np.sqrt(2)
        ref_attrs = {"reference": "Lagrangian particle reference (particles.simulate, same model, dt and kappa)",
                     "reference_particles": n_ref, "reference_error": float(ref_error_t.max()),
                     "reference_error_note": "max over save times of SW_2 between two independent reference "
                                             "runs, divided by sqrt(2): the reference's own sampling error "
                                             "(per time in the data variable reference_error)",
                     "reference_build_seconds": ref["seconds"], "reference_cached": int(ref["cached"]),
                     "reference_file": ref["file"]}
    transports = {str(n): f"sliced SW_2, {n_projections} directions (ot.sliced.get_random_projections), "
                          f"{sliced.representation} per projected reference" for n in n_values}

    return {"reference": reference, "attrs": ref_attrs, "transports": transports, "note": note, "error_t": ref_error_t,
            "error_t_long": ("estimate of SW_2 between the spectral reference and its piecewise-linear quantile "
                             "functions, plus 2 "
                             "sqrt(spectral tail)" if spec is not None else
                             "SW_2 between two independent reference runs / sqrt(2)")}


def _cached_reference(key: dict, ts, store, build, dims: dict, log_time_scale: float) -> dict:
    """``build()`` (a dict of arrays, each (time, ...) or (time,)), kept in ``store`` as
    ``reference_<hash of key>.nc`` (time coordinate as every dataset's, :func:`metrics._data.dataset.time_coord`)
    and loaded instead of rebuilt when the key matches: only the key attr and the data variables are
    read, so a file written before the time coordinate had its attrs loads as well; adds ``seconds``
    (the build's cost), ``cached`` and ``file``."""
    text = json.dumps(key, sort_keys=True, default=str)
    path = None
    if store is not None:
        path = reference_path(store, text)
        ds = read_reference(path, text)
        if ds is not None:
            out = {v: ds[v].values for v in ds.data_vars}
            return dict(out, seconds=float(ds.attrs["build_seconds"]), cached=True, file=str(path))
    t0 = _time.perf_counter()
    out = build()
    seconds = _time.perf_counter() - t0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {}
        for v, arr in out.items():
            arr = np.asarray(arr)
            names = dims.get(v, ("time",) + tuple(f"{v}_dim{i}" for i in range(1, arr.ndim)))
            data[v] = (names, arr, {"long_name": f"reference {v}", "units": "1"})
        ds = xr.Dataset(data, coords={"time": time_coord(ts, log_time_scale)},
                        attrs={"title": "headflow mean-field limit study: cached reference",
                               "reference_key": text, "build_seconds": float(seconds)})
        atomic_to_netcdf(ds, path, index=True)
    return dict(out, seconds=seconds, cached=False, file="" if path is None else str(path))


def _sphere_reference(model, density_fn, key: dict, ts, bound, store, progress) -> dict:
    """The d >= 3 reference: two independent Lagrangian runs of ``key["n_reference"]`` particles
    (run 0 is the reference, run 1 measures its error by SW_2), built once and kept in ``store``."""

    def build():
        n_ref, d, seed = key["n_reference"], model.d, key["seed"]
        runs = []
        for r in range(2):  # run 0 is the reference, run 1 measures its error
            if progress:  # (True: asked for; the default None leaves it to the "reference" bar)
                tqdm_class().write(f"reference run {r + 1}/2: {n_ref} particles on S^{d - 1}, t in [0, {key['t1']:g}]")
            ss = np.random.SeedSequence(seed, spawn_key=(2**31, r))
            rng_init, rng_noise = (np.random.default_rng(s) for s in ss.spawn(2))
            y0 = sample_sphere_density(density_fn, n_ref, d=d, rng=rng_init, bound=bound)
            runs.append(np.asarray(simulate(y0, model, t1=key["t1"], dt=key["dt"], save=SaveAt(ts=ts),
                                            kappa=key["kappa"], rng=rng_noise, method=particle_method(key["kappa"]),
                                            progress=progress is True).x))
        sliced = SlicedReference(runs[0], n_projections=key["n_projections"], n_quantiles=key["n_quantiles"],
                                 seed=seed)
        return {"positions": runs[0], "own_sw2": np.array([sliced(runs[1][k], k)[0] for k in range(len(ts))]),
                "energy": np.array([mf.measure_energy(model, y) for y in runs[0]]),
                "entropy": np.array([measure_entropy(model, y) for y in runs[0]])}

    return _cached_reference(key, ts, store, build, {"positions": ("time", "particle", "component")},
                             model.log_time_scale)

def _spectral_reference(reference, model, density_fn, ts, kappa, m_grid, n_projections, n_quantiles, seed):
    """(the spectral StudyReference or None, why not) for reference "auto" or "spectral"."""
    if reference not in ("auto", "spectral"):
        return None, ""
    from .spectral_reference import StudyReference

    spec = StudyReference.build(model, density_fn, ts, kappa=kappa, m_grid=m_grid, n_projections=n_projections,
                                n_quantiles=n_quantiles, seed=seed, entropy_fn=measure_entropy)
    if spec is None and reference == "spectral":
        raise InvalidParameterError(
            "reference='spectral' of mean_field_limit_study covers S^1 (scaled-rotation heads), S^2, and d >= 4 "
            "with scalar heads and a density zonal about the last axis; use reference='auto'.")
    if spec is not None and spec.solution is None:
        if reference == "spectral":
            raise InvalidParameterError(f"reference='spectral' of mean_field_limit_study: "
                                        f"{spec.attrs['reference_note']}; use reference='auto'.")
        return None, spec.attrs["reference_note"]
    return spec, ""


