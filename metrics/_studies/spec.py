r"""A study as a declared object: its cells, the fields of their keys, and what every study shares.

A :class:`Study` names what one cell computes (``cell(params, seed_index, settings)``, run
by :func:`metrics.run_sweep`'s verified-cell machinery), which settings enter the cells' keys
(``key(settings)``: explicit fields under a numbered format, so a store written by one version
is found by the next) and what kind of Dataset it makes. :meth:`Study.run` runs the cells of
every (n, seed); the shared pieces of the assembly (coordinates, cluster variables, attrs with
provenance) are the functions below, so a study module holds only its own science.

Key format 1 is the format of the first studies: the key fields' JSON (sorted keys) as the
study's ``cell_key`` setting. A study that changes what a cell computes for the same fields
raises its ``key_version``, which then enters the key; the file names of unchanged studies are
pinned by ``tests/metrics/test_store_keys.py``.
"""

from __future__ import annotations

import json
import time as _time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np
import xarray as xr

from particles import SaveAt, __version__, simulate

from .._data.dataset import KIND_ATTR, time_coord
from .._data.provenance import model_attrs, netcdf_safe, provenance
from .._runs.cells import saved_to_dataset
from .._runs.executors import FixedModel

__all__ = ["Study", "StudySettings", "particle_method", "run_cell", "seed_counts", "study_coords", "cluster_variables",
           "study_attrs"]


@dataclass(frozen=True)
class Study:
    """What a study is, declared once.

    Attributes
    ----------
    name : the public function (error messages, the model's key name, the ``history`` attr)
    kind : the Dataset kind it makes (the ``headflow_kind`` attr the ``ds.attn`` accessor reads)
    label : the progress bar's label (``{sphere}`` is replaced by d - 1; the settings hold ``d``)
    cell : ``cell(params, seed_index, settings) -> xr.Dataset`` with dim ``time`` (the cell contract of
        :func:`metrics.run_sweep`)
    key : ``key(settings) -> dict`` of every setting a cell depends on beyond run_sweep's own
        (t1, dt, n_saves, kappa, seed, the parameters of the cell)
    key_version : the key format; 1 writes the fields as they are, a later one adds ``key_version``
    legacy_key : ``legacy_key(settings) -> dict or None``, the key fields under format 1 when a later
        format changed them: a store's cells of that format are found and migrated (renamed and
        restamped, once, with a message), never recomputed
    """

    name: str
    kind: str
    label: str
    cell: Callable
    key: Callable | None = None
    key_version: int = 1
    legacy_key: Callable | None = None

    def cell_key(self, settings: dict) -> str:
        """The JSON of the key fields (sorted keys), the study's part of every cell key (``key`` None:
        the typed settings' own :meth:`StudySettings.key`)."""
        fields = dict(self.key(settings) if self.key is not None else settings["study"].key())
        if self.key_version > 1:
            fields["key_version"] = self.key_version
        return json.dumps(fields, sort_keys=True, default=str)

    def legacy_cell_key(self, settings: dict) -> str | None:
        """The JSON of the format-1 key fields when they differ from today's (else None)."""
        if self.legacy_key is None:
            return None
        legacy = json.dumps(self.legacy_key(settings), sort_keys=True, default=str)
        return None if legacy == self.cell_key(settings) else legacy

    def cells(self, grid: dict, n_seeds: int, settings: dict, model_fn, **run) -> xr.Dataset:
        """The cells of ``grid`` x ``n_seeds`` through :func:`metrics.run_sweep` (verified, resumable,
        on its engines), with this study's cell, key and label. ``run``: seed, t1, dt, n_saves, kappa,
        method, store, engine, max_workers, progress."""
        from .._runs.sweep import run_sweep

        cell_settings = {**settings, "key": self.cell_key(settings), "legacy_key": self.legacy_cell_key(settings),
                         "caller": self.name,
                         "progress_label": self.label.format(sphere=settings["d"] - 1)}
        return run_sweep(grid, n_seeds=n_seeds, metrics=(), model_fn=model_fn, cell_fn=self.cell,
                         cell_settings=cell_settings, **run)

    def run(self, model, n_values, counts, settings: dict, **run) -> xr.Dataset:
        """The cells of every (n, seed < counts[n]) of one model, one :meth:`cells` call per seed count
        (a store resumes); seeds an n does not run are NaN (float variables) in the merged Dataset."""
        settings = {"study": settings, "d": model.d} if isinstance(settings, StudySettings) else \
            {**settings, "d": model.d}
        model_fn = FixedModel(model, f"{self.name}.model")
        parts = [self.cells({"n_particles": [n for n, c in zip(n_values, counts) if c == k]}, k, settings, model_fn,
                            **run) for k in sorted(set(counts))]
        if len(parts) == 1:
            return parts[0]
        parts = [p.assign(success=p.success.astype(float)) for p in parts]
        return xr.concat(parts, dim="n_particles", join="outer").sortby("n_particles")


@dataclass(frozen=True)
class StudySettings:
    """The base of a study's frozen settings: subclass it as a frozen dataclass and list the fields
    its cells depend on in ``KEY_FIELDS`` (a field a cell does not read, such as the number of
    bootstrap draws of the assembly, stays out, so changing it reuses the cells). :meth:`Study.run`
    hands it to every cell as ``settings["study"]``."""

    KEY_FIELDS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        names = {f.name for f in fields(self)}
        unknown = [k for k in self.KEY_FIELDS if k not in names]
        if unknown:
            raise TypeError(f"{type(self).__name__}.KEY_FIELDS names {unknown}, which are not fields "
                            f"of the settings (fields: {sorted(names)}).")

    def key(self) -> dict:
        """The key fields and their values (a :class:`Study` without ``key`` uses this)."""
        return {name: getattr(self, name) for name in self.KEY_FIELDS}

    def config(self) -> dict:
        """Every field, netCDF-safe: the run's ``config`` as the Dataset records it."""
        return netcdf_safe({f.name: getattr(self, f.name) for f in fields(self)})


def particle_method(kappa: float) -> str:
    """RK4 for the noiseless flow, Euler-Maruyama (on the sphere) with noise."""
    return "rk4" if np.isinf(kappa) else "euler_maruyama"


def run_cell(x0, model, settings: dict, save_fn, rng) -> xr.Dataset:
    """One particle run of a study cell from ``x0`` to ``settings["t1"]``: ``save_fn``'s columns at the save
    times ``settings["ts"]`` (RK4 without noise, Euler–Maruyama with ``settings["kappa"]`` finite; a run that
    stops is cut and NaN-padded)."""
    kappa = settings["kappa"]
    traj = simulate(x0, model, t1=settings["t1"], dt=settings["dt"], kappa=kappa, rng=rng, on_failure="return",
                    save=SaveAt(ts=settings["ts"], x=False, fn=save_fn),
                    method=particle_method(kappa))
    return saved_to_dataset(traj, settings["ts"])


def seed_counts(n_seeds, n_values) -> list[int]:
    """Seeds of each n (declared: one integer for all, or one per n)."""
    return list(n_seeds) if isinstance(n_seeds, (list, tuple)) else [int(n_seeds)] * len(n_values)


def study_coords(n_values, counts, ts, log_time_scale: float, max_clusters: int, bound: str | None = None) -> dict:
    """The coordinates every (n, seed, time) study has: ``n_particles``, ``seed``, ``time`` (with its
    time convention), ``cluster_rank``, and the interval ``bound`` when the study fits intervals
    (``bound`` is then its long name)."""
    unit = {"units": "1"}
    coords = {
        "n_particles": ("n_particles", np.asarray(n_values), {"long_name": "number of tokens", **unit}),
        "seed": ("seed", np.arange(max(counts)), {"long_name": "seed index (SeedSequence spawn key)", **unit}),
        "time": time_coord(ts, log_time_scale),
        "cluster_rank": ("cluster_rank", np.arange(max_clusters), {"long_name": "rank of the cluster by mass", **unit}),
    }
    if bound is not None:
        coords["bound"] = ("bound", np.array([0.025, 0.975]), {"long_name": bound, **unit})
    return coords


def cluster_variables(sweep: xr.Dataset, max_clusters: int, eps: float, counts) -> dict:
    """The variables of the cells' cluster columns (:func:`metrics._observables.clustering.cluster_row`),
    whether each run reached t1, and the seeds each n ran."""
    dims = ("n_particles", "seed", "time")
    masses = np.stack([sweep[f"cluster_mass_{j}"].values for j in range(max_clusters)], axis=-1)
    return {
        "n_clusters": (dims, sweep["n_clusters"].values,
                       {"long_name": f"number of clusters (geodesic eps = {eps:g})", "units": "1"}),
        "cluster_mass": (dims + ("cluster_rank",), masses, {"long_name": f"mass of the k-th largest cluster "
                                                                         f"(first {max_clusters}; 0 if fewer)",
                                                            "units": "1"}),
        "success": (dims[:-1], sweep["success"].values,
                    {"long_name": "1 if the run reached t1 (NaN: a seed this n does not run)", "units": "1"}),
        "n_seeds_run": (("n_particles",), np.asarray(counts), {"long_name": "seeds run at this n (the others are "
                                                                            "NaN)", "units": "1"}),
    }


def study_attrs(study: Study, *, title: str, model, sweep: xr.Dataset, config: dict, seed: int, spawn_key: str,
                t_start: float, **extra) -> dict:
    """The attrs every study writes: title, source, history, kind, the run's settings (``extra``), the
    model's fields, its cells' failures, its duration and the provenance of ``config`` and the seeds."""
    attrs = {
        "title": title,
        "source": f"headflow {__version__}",
        "history": f"created by metrics.{study.name} (cells by metrics.run_sweep)",
        KIND_ATTR: study.kind,
        **extra,
        "failed_cells": sweep.attrs["failed_cells"],  # runs that stopped, with the solver's reason
        "study_seconds": float(_time.perf_counter() - t_start),
        **model_attrs(model),
        **provenance(config=config, seeds={"entropy": str(np.random.SeedSequence(seed).entropy),
                                           "spawn_key": spawn_key}, model=model),
    }
    return netcdf_safe(attrs)
