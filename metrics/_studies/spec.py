r"""A study as a declared object: its settings, its cells, the fields of their keys, and what every study shares.

A study's settings are a frozen :class:`StudySettings` dataclass, one table: each field is a
:func:`setting` (its rule, its default, its name in the cells' key), the rules between fields are
``RELATIONS``, and :func:`study_function` makes the public function from the table (parameters,
defaults, declaration). A :class:`Study` names what one cell computes (``cell(params, seed_index,
settings, entropy)``, run by the verified cell engine of :func:`metrics.run_sweep`), how the settings
key the cells and what kind of Dataset it makes. :meth:`Study.run` runs the cells of every (n, seed), or
of every point of the grid axes the settings declare (:mod:`metrics._studies.grid`); the shared pieces
of the assembly (coordinates, cluster variables, attrs with provenance) are the functions below, so a
study module holds only its own science.

Key format 1 is the format of the first studies: the key fields' JSON (sorted keys) as the
study's ``cell_key`` setting. A study that changes what a cell computes for the same fields
raises its ``key_version``, which then enters the key; the file names of unchanged studies are
pinned by ``tests/metrics/test_store_keys.py``.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import time as _time
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import ClassVar

import numpy as np
import xarray as xr

from particles import MultiHead, SaveAt, __version__, simulate
from particles.validation import AnyOf, Declaration, SequenceOf, declare, keyword_only

from .._data.dataset import KIND_ATTR, time_coord
from .._data.provenance import model_attrs, netcdf_safe, provenance
from .._runs.assemble import SUMMATION_ATTRS
from .._runs.cells import saved_to_dataset
from .._runs.executors import FixedModel, check_not_bootstrapping, check_picklable
from .._runs.keys import model_key
from .grid import RUN_SETTINGS, axis_long_name, grid_axes, grid_coords, run_grid

__all__ = ["Study", "StudySettings", "setting", "study_function", "particle_method", "run_cell", "cell_rngs",
           "check_process_engine", "seed_counts", "study_coords", "cluster_variables", "study_attrs"]


@dataclass(frozen=True)
class Study:
    """What a study is, declared once.

    Attributes
    ----------
    name : the public function (error messages, the model's key name, the ``history`` attr)
    kind : the Dataset kind it makes (the ``headflow_kind`` attr the ``ds.attn`` accessor reads)
    label : the progress bar's label (``{sphere}`` is replaced by d - 1 of the settings' model)
    cell : ``cell(params, seed_index, settings, entropy) -> xr.Dataset`` with dim ``time``: one cell of
        :func:`metrics.run_sweep` (``params``: its grid point, ``settings``: the study's
        :class:`StudySettings`, ``entropy``: the run's root entropy, which the cell spawns its streams from)
    key : ``key(settings) -> dict`` of every setting a cell depends on beyond run_sweep's own
        (t1, dt, n_saves, kappa, seed, the parameters of the cell); None: :meth:`StudySettings.key`
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

    def cell_key(self, settings: StudySettings) -> str:
        """The JSON of the key fields (sorted keys), the study's part of every cell key."""
        fields_ = dict(self.key(settings) if self.key is not None else settings.key())
        if self.key_version > 1:
            fields_["key_version"] = self.key_version
        return json.dumps(fields_, sort_keys=True, default=str)

    def legacy_cell_key(self, settings: StudySettings) -> str | None:
        """The JSON of the format-1 key fields when they differ from today's (else None)."""
        if self.legacy_key is None:
            return None
        legacy = json.dumps(self.legacy_key(settings), sort_keys=True, default=str)
        return None if legacy == self.cell_key(settings) else legacy

    def cells(self, grid: dict, n_seeds: int, settings: StudySettings, model_fn=None, **run) -> xr.Dataset:
        """The cells of ``grid`` x ``n_seeds`` on the cell engine in :func:`metrics.run_sweep`'s key format and
        Dataset (verified, resumable, on its engines; :func:`metrics._runs.study_cells.study_sweep`), with this study's
        cell, key and label, each cell on the typed settings; the run's seed, t1, dt, n_saves, kappa and
        method are the settings' own (where it has them). ``model_fn``: what run_sweep records as the
        cells' model (default: the settings' ``model``); ``run``: store, engine, max_workers, progress."""
        from .._runs.study_cells import study_sweep

        model_fn = model_fn or FixedModel(settings.model, f"{self.name}.model")
        own = {name: getattr(settings, name) for name in RUN_SETTINGS if hasattr(settings, name)}
        label = self.label.format(sphere=settings.model.d - 1) if "{sphere}" in self.label else self.label
        return study_sweep(grid, n_seeds, self.cell, settings.for_cells(), key=self.cell_key(settings),
                           legacy_key=self.legacy_cell_key(settings), caller=self.name, label=label,
                           model_fn=model_fn, run=own, **run)

    def run(self, settings: StudySettings, **run) -> xr.Dataset:
        """The study's cells, assembled (a store resumes). Settings with grid axes (``setting(..., axis=True)``):
        every grid point x seed, each cell on the typed settings of its point and keyed by them; dims (*axes,
        seed, the cells' own dims), coordinates with long names and units (:func:`metrics._studies.grid.run_grid`).
        Otherwise every (n, seed < its count) of the settings' ``model``, ``n_values`` and ``n_seeds``, one
        :meth:`cells` call per seed count; seeds an n does not run are NaN (float variables) in the merged Dataset."""
        if grid_axes(type(settings)):
            return run_grid(self, settings, **run)
        n_values, counts = settings.n_values, settings.counts
        parts = [self.cells({"n_particles": [n for n, c in zip(n_values, counts) if c == k]}, k, settings, **run)
                 for k in sorted(set(counts))]
        if len(parts) == 1:
            return parts[0]
        parts = [p.assign(success=p.success.astype(float)) for p in parts]
        return xr.concat(parts, dim="n_particles", join="outer").sortby("n_particles")



def setting(rule, default=MISSING, *, key: bool | str = False, since: bool = False, attr: bool = False,
            cells: bool = True, axis: bool | str = False):
    """A field of a study's settings: its rule (a :mod:`particles.validation` constraint: the one check
    of the value, which the study's public function also declares), its default, and

    - ``key``: True when the cells depend on it (it names them), or the name it has in the cells' key
      when that differs;
    - ``since``: the field joined the key after stores were written: it enters the key only when it
      differs from its default, so those stores keep their names;
    - ``attr``: the Dataset also holds it as an attr of its own (:func:`study_attrs`);
    - ``cells``: False when the cells never read it (a density function, whose sample the study's reference
      carries): it is not sent to them, so a lambda runs on worker processes;
    - ``axis``: True (or the axis' long name) when it is a grid axis of the study: one value or a sequence of
      distinct ones, each checked by ``rule``; :meth:`Study.run` runs every point of the grid, and each cell
      receives the settings of its point (the point's value in the field, and in the ``model`` for β, d, a
      head's strength ``lambda_<h>`` or ``spread``)."""
    if axis:
        rule = AnyOf(rule, SequenceOf(rule, min_len=1))
    return field(default=default, metadata={"rule": rule, "key": key, "since": since, "attr": attr, "cells": cells,
                                            "axis": axis})


@dataclass(frozen=True)
class StudySettings:
    """The base of a study's frozen settings: one table of fields (:func:`setting`: rule, default, key
    name), validated on construction by the same constraints the public function declares.

    The fields that name the cells are those marked ``key`` plus ``KEY_FIELDS`` (an explicit tuple of
    field names, for fields written without :func:`setting`); a field a cell does not read (the
    bootstrap draws of the assembly) stays out, so changing it reuses the cells. ``RELATIONS``: the
    :class:`particles.validation.Relation` s between fields. :meth:`Study.run` hands the settings to
    every cell."""

    KEY_FIELDS: ClassVar[tuple[str, ...]] = ()
    RELATIONS: ClassVar[tuple] = ()

    def __post_init__(self):
        names = {f.name for f in fields(self)}
        unknown = [k for k in self.KEY_FIELDS if k not in names]
        if unknown:
            raise TypeError(f"{type(self).__name__}.KEY_FIELDS names {unknown}, which are not fields "
                            f"of the settings (fields: {sorted(names)}).")
        declared = Declaration(type(self).__name__, self.rules(), list(self.RELATIONS))
        for name, value in declared.validate({name: getattr(self, name) for name in self.rules()}).items():
            object.__setattr__(self, name, value)

    def for_cells(self) -> StudySettings:
        """These settings as the cells receive them: the fields marked ``cells=False`` are None."""
        out = copy.copy(self)
        for f in fields(self):
            if not f.metadata.get("cells", True):
                object.__setattr__(out, f.name, None)
        return out

    @classmethod
    def rules(cls) -> dict:
        """Each field's rule (the fields written with :func:`setting`)."""
        return {f.name: f.metadata["rule"] for f in fields(cls) if "rule" in f.metadata}

    @classmethod
    def of(cls, arguments: dict, **derived) -> StudySettings:
        """The settings of a call's ``arguments`` (their fields; the rest, such as the run options, are
        left out) and ``derived`` fields."""
        return cls(**{name: arguments[name] for name in cls.rules() if name in arguments}, **derived)

    def key(self, legacy: bool = False) -> dict:
        """The key fields and their values, a model by :func:`metrics.extend.model_key` (``legacy``: by
        its attrs as they are, the form of key format 1)."""
        out = {}
        for f in fields(self):
            mark = f.metadata.get("key") or f.name in self.KEY_FIELDS
            value = getattr(self, f.name)
            if mark and not (f.metadata.get("since") and value == f.default):
                if isinstance(value, MultiHead):
                    value = model_attrs(value) if legacy else model_key(value)
                out[mark if isinstance(mark, str) else f.name] = value
        return out

    def config(self) -> dict:
        """Every field written with :func:`setting` (a model by its attrs): the run's ``config`` as the
        Dataset's provenance records it (JSON in ``attrs["config"]``)."""
        return {name: model_attrs(v) if isinstance(v, MultiHead) else v
                for name in self.rules() for v in [getattr(self, name)]}

    @property
    def counts(self) -> list[int]:
        """The seeds each n runs (``n_seeds``: one count for all, or one per ``n_values`` entry)."""
        return seed_counts(self.n_seeds, self.n_values)

    @property
    def ts(self) -> np.ndarray:
        """The save times, ``np.linspace(0, t1, n_saves)`` (as :func:`metrics.run_sweep`'s)."""
        return np.linspace(0.0, self.t1, self.n_saves)


def study_function(settings_class: type, run_defaults: dict | None = None):
    """The public function of a study from its settings' table: ``@study_function(Settings)`` on
    ``impl(settings, **run)`` gives a function whose parameters are the fields of ``Settings`` (their
    defaults; fields after ``KW_ONLY`` keyword-only) and the run options (``store``, ``engine``,
    ``max_workers``, ``progress``), declared by the fields' rules (so the command line and the
    generated bad-input suite read them), which calls ``impl`` with the settings object."""
    from .._runs.params import RUN_DEFAULTS, RUN_OPTIONS

    run_defaults = RUN_DEFAULTS if run_defaults is None else run_defaults
    kinds = {True: inspect.Parameter.KEYWORD_ONLY, False: inspect.Parameter.POSITIONAL_OR_KEYWORD}
    params = [inspect.Parameter(f.name, kinds[f.kw_only], default=inspect.Parameter.empty if f.default is MISSING
                                else f.default) for f in fields(settings_class) if "rule" in f.metadata]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=v) for name, v in run_defaults.items()]
    signature = inspect.Signature(params, return_annotation=xr.Dataset)

    def wrap(impl):
        @functools.wraps(impl)
        def public(*args, **kwargs):
            arguments = signature.bind(*args, **kwargs).arguments
            return impl(settings_class.of(arguments), **{k: arguments[k] for k in run_defaults if k in arguments})

        public.__signature__ = signature
        return declare(relations=settings_class.RELATIONS, **settings_class.rules(),
                       **{k: RUN_OPTIONS[k] for k in run_defaults})(public)

    return wrap


def particle_method(kappa: float) -> str:
    """RK4 for the noiseless flow, Euler-Maruyama (on the sphere) with noise."""
    return "rk4" if np.isinf(kappa) else "euler_maruyama"


def run_cell(x0, settings: StudySettings, save_fn, rng) -> xr.Dataset:
    """One particle run of a study cell from ``x0`` under the settings' ``model`` to their ``t1``:
    ``save_fn``'s columns at the save times ``settings.ts`` (RK4 without noise, Euler–Maruyama with a
    finite ``kappa``; a run that stops is cut and NaN-padded)."""
    kappa = getattr(settings, "kappa", np.inf)
    traj = simulate(x0, settings.model, t1=settings.t1, dt=settings.dt, kappa=kappa, rng=rng, on_failure="return",
                    save=SaveAt(ts=settings.ts, x=False, fn=save_fn), method=particle_method(kappa), progress=False)
    return saved_to_dataset(traj, settings.ts)


def cell_rngs(entropy, *spawn_key: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The two streams of a cell, for its initial tokens and its noise: ``SeedSequence(entropy,
    spawn_key)`` spawned twice (the spawn key says which draws cells share)."""
    init, noise = np.random.SeedSequence(entropy, spawn_key=spawn_key).spawn(2)
    return np.random.default_rng(init), np.random.default_rng(noise)


def check_process_engine(caller: str, engine, **needed) -> None:
    """Before a study's first work with ``engine="process"`` (a reference run, say): the script has a main
    guard, and the objects ``needed`` by the workers (by parameter name) pickle."""
    if engine == "process":
        check_not_bootstrapping(caller)
        check_picklable(job_args=tuple(needed.values()), caller=caller, named=needed)


def seed_counts(n_seeds, n_values) -> list[int]:
    """Seeds of each n (declared: one integer for all, or one per n)."""
    return list(n_seeds) if isinstance(n_seeds, (list, tuple)) else [int(n_seeds)] * len(n_values)


@keyword_only("log_time_scale", "max_clusters", "bound")
def study_coords(n_values, counts, ts=None, *, log_time_scale: float = 0.0, max_clusters: int | None = None,
                 bound: str | None = None) -> dict:
    """The coordinates of a study, each with its long name and units: its axes (``n_values``: the n of an
    (n, seed) study, as ``n_particles``, or a dict of grid axes to their values), ``seed`` (``counts``: the
    seeds of each n, or one count), ``time`` (with its time convention) when ``ts`` is given, ``cluster_rank``
    when ``max_clusters`` is, and the interval ``bound`` when the study fits intervals (its long name)."""
    unit = {"units": "1"}
    axes = n_values if isinstance(n_values, dict) else {"n_particles": n_values}
    coords = grid_coords(axes, {k: axis_long_name(k) for k in axes}, max(np.atleast_1d(counts)))
    if ts is not None:
        coords["time"] = time_coord(ts, log_time_scale)
    if max_clusters is not None:
        coords["cluster_rank"] = ("cluster_rank", np.arange(max_clusters),
                                  {"long_name": "rank of the cluster by mass", **unit})
    if bound is not None:
        coords["bound"] = ("bound", np.array([0.025, 0.975]), {"long_name": bound, **unit})
    return coords


@keyword_only("max_clusters", "eps", "counts")
def cluster_variables(sweep: xr.Dataset, *, max_clusters: int, eps: float, counts) -> dict:
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


def study_attrs(study: Study, settings: StudySettings, *, title: str, sweep: xr.Dataset, spawn_key: str,
                t_start: float, **extra) -> dict:
    """The attrs every study writes: title, source, history, kind, the settings marked ``attr`` and the
    run's own (``extra``), the model's fields, the cells' failures, the study's duration and the provenance
    of the settings' config and seeds. A study over grid axes also records them (``grid_axes``, JSON), and no
    attr repeats one of its axes (a β axis leaves the model's ``beta`` out: the coordinate holds it)."""
    model, seed, axes = settings.model, settings.seed, list(grid_axes(type(settings)))
    attrs = {
        "title": title,
        "source": f"headflow {__version__}",
        "history": f"created by {study.name} (cells by metrics.extend.Study over its grid axes)" if axes else
                   f"created by metrics.{study.name} (cells by metrics.run_sweep)",
        KIND_ATTR: study.kind,
        **{f.name: getattr(settings, f.name) for f in fields(settings) if f.metadata.get("attr")},
        "seed_entropy": str(np.random.SeedSequence(seed).entropy),
        **extra,
        "failed_cells": sweep.attrs["failed_cells"],  # runs that stopped, with the solver's reason
        # how the cells' attention sums were done (each head's route, the largest error bound), as a sweep says
        **{k: sweep.attrs[k] for k in SUMMATION_ATTRS if k in sweep.attrs},
        "study_seconds": float(_time.perf_counter() - t_start),
        **model_attrs(model),
        **provenance(config=settings.config(), seeds={"entropy": str(np.random.SeedSequence(seed).entropy),
                                                      "spawn_key": spawn_key}, model=model),
    }
    if axes:
        attrs = {k: v for k, v in attrs.items() if k not in axes} | {"grid_axes": json.dumps(axes)}
    return netcdf_safe(attrs)
