"""xarray schema for headflow results: trajectories and diagnostics as labelled Datasets.

Conventions (CF-style): dims ``time``, ``particle``, ``component``, ``head``; every
variable and coordinate has ``long_name`` and ``units`` attrs (``"1"`` if dimensionless);
run parameters are Dataset attrs, netCDF-safe (no None, booleans as int, arrays as lists
of floats); ``title``, ``source``, ``history`` and ``Conventions`` are always set.

Units are UDUNITS strings (``"1"`` when dimensionless: entropies are in nats, which is a
dimensionless unit and not a UDUNITS symbol; ``"nat"`` would parse as nano-technical-atmospheres).
``standard_name`` is set only where the CF table has one: none of the quantities here has one
(model time is dimensionless, so it is not CF ``time``).

Time convention: the ``time`` coordinate is the physical time t of the dynamics when the model's
``log_time_scale`` c is 0 (the default of ``particles.MultiHead`` and of the command line). A model
with c != 0 (``log_time_scale="auto"``: c = beta max_h ||M_h||, USA heads at large beta) is
integrated in the rescaled time t' = e^c t; the coordinate then says so in its ``long_name``
(``"rescaled time t' = e^c t, c = ..."``) and a ``comment``, and every time coordinate whose model
is known carries the ``log_time_scale`` attr (:func:`time_coord`).

Write with the netCDF4 engine (xarray's default when netCDF4 is installed, and what
:func:`metrics.run_sweep` uses): the netCDF3 format of the ``scipy`` engine has no 64-bit
integers and narrows int64 coordinates (``particle``, ``seed``) to int32.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import xarray as xr

from particles import DIAGNOSTICS, MultiHead, Trajectory, __version__
from particles.extend import field_fingerprint
from particles.validation import NONE, AnyOf, Instance, InvalidParameterError, Model, Relation, declare

from .provenance import DICT_OR_NONE, model_attrs, netcdf_safe, provenance

__all__ = ["trajectory_to_dataset", "time_coord", "time_index", "COORDS", "VARIABLES", "KIND_ATTR", "DATASET_KINDS"]

#: the attr in which every Dataset of the library says what it is (written where it is made; ``ds.attn``
#: reads it): one of :data:`DATASET_KINDS`
KIND_ATTR = "headflow_kind"
#: Dataset kind -> the function that makes it
DATASET_KINDS = {
    "trajectory": "metrics.trajectory_to_dataset (headflow simulate)",
    "sweep": "metrics.run_sweep (headflow sweep)",
    "study": "metrics.mean_field_limit_study (headflow study)",
    "chaos": "metrics.chaos_horizon_study",
    "phase": "metrics.phase_diagram",
    "head_geometry": "metrics.head_geometry",
    "sentence_flow": "metrics.sentence_flow",
}

COORDS = {
    "time": {"long_name": "time", "units": "1"},  # the physical time; time_coord() adds the model's scale
    "particle": {"long_name": "token index", "units": "1"},
    "component": {"long_name": "ambient coordinate index", "units": "1"},
    "head": {"long_name": "attention head index", "units": "1"},
}

#: long name, units and trailing dims of every named variable a Dataset may hold
VARIABLES = dict(DIAGNOSTICS)
VARIABLES.update({
    "mean_entropy": ("token-averaged softmax attention entropy (nats)", "1", ("head",)),
    "n_clusters": ("number of clusters (eps-connected components)", "1", ()),
    "largest_cluster": ("mass of the largest cluster", "1", ()),
    "w2_to_uniform": ("sliced W2 distance to the uniform measure", "rad", ()),
})


def _traj_d(traj):
    return traj.x.shape[-1] if traj.x is not None else (None if traj.x_final is None else np.shape(traj.x_final)[-1])


@declare(traj=Instance(Trajectory, hint="Pass the result of particles.simulate(...)."), model=AnyOf(NONE, Model()),
         title=Instance(str), attrs=DICT_OR_NONE, config=DICT_OR_NONE, seeds=DICT_OR_NONE,
         relations=[Relation(("model", "traj"), lambda m, tr: m is None or _traj_d(tr) in (None, m.d),
                             "must be the model that was simulated (its d differs from the tokens' d)",
                             breaks={"model": MultiHead.scalar([1.0], d=7, beta=1.0, kind="usa")})])
def trajectory_to_dataset(traj: Trajectory, model: MultiHead | None = None, *, title: str = "headflow trajectory",
                          attrs: dict | None = None, config: dict | None = None,
                          seeds: dict | None = None) -> xr.Dataset:
    """Convert a :class:`particles.Trajectory` into an ``xr.Dataset``.

    ``positions`` (time, particle, component) when stored; each saved statistic with the
    dims of :data:`particles.DIAGNOSTICS` when its name is known there, else generic dims
    ``<name>_dim<k>``. The events of the run (``simulate(events=...)``), when it had some:
    ``event_time`` (event, occurrence) and ``event_positions`` (event, occurrence, particle,
    component), NaN past an event's last occurrence (a stack: a ``system`` dim after ``event``), with
    ``event_terminal`` and ``event_direction`` (event). The attrs carry :func:`provenance`:
    ``config`` (default: the model and solver settings known from ``traj`` and ``model``) and ``seeds``.

    Examples
    --------
    >>> import particles
    >>> model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    >>> traj = particles.simulate(np.eye(3), model, t1=0.5, dt=0.1)
    >>> ds = trajectory_to_dataset(traj, model)
    >>> ds.positions.dims
    ('time', 'particle', 'component')
    """
    _same_model(traj, model)
    data_vars = {}
    if traj.x is not None:
        data_vars["positions"] = (("time", "particle", "component"), traj.x,
                                  {"long_name": "token positions on the sphere", "units": "1"})
    for name, arr in traj.saved.items():
        arr = np.asarray(arr)
        if name in VARIABLES:
            long_name, units, dims = VARIABLES[name]
        else:
            long_name, units, dims = name, "1", tuple(f"{name}_dim{k}" for k in range(arr.ndim - 1))
        if len(dims) != arr.ndim - 1:
            dims = tuple(f"{name}_dim{k}" for k in range(arr.ndim - 1))
        data_vars[name] = (("time",) + tuple(dims), arr, {"long_name": long_name, "units": units})
    overflow = _overflow_notes(data_vars)
    time = time_coord(traj.t, None if model is None else model.log_time_scale)
    data_vars.update(_event_variables(traj.events, time[2]))
    ds = xr.Dataset(data_vars, coords={"time": time})
    for dim in ("particle", "component", "head"):
        if dim in ds.dims:
            ds = ds.assign_coords({dim: (dim, np.arange(ds.sizes[dim]), COORDS[dim])})
    if traj.events:
        ds = ds.assign_coords(event=("event", [rec.name for rec in traj.events], {"long_name": "event function"}))
    if config is None:
        config = {"method": traj.method, "t0": float(traj.t[0]), "t1": float(traj.t[-1]), "n_saves": len(traj.t),
                  "n_steps": traj.n_steps, "model": None if model is None else model_attrs(model)}
    base = {
        "title": title,
        KIND_ATTR: "trajectory",
        "source": f"headflow {__version__}",
        "history": f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} created by headflow",
        **provenance(config=config, seeds=seeds, model=model),
        "status": traj.status,
        "message": traj.message,
        "method": traj.method,
        "n_steps": traj.n_steps,
    }
    if model is not None:
        base.update(model_attrs(model))
    if getattr(traj, "noise_entropy", ""):  # the noise of an unseeded run, so that it can be repeated
        base["noise_entropy"] = traj.noise_entropy
    summation = getattr(traj, "summation", {})
    if summation:  # what the run's sums did: the route of each head, the largest bound met at any step
        base["summation_route"] = ", ".join(summation["route"])
        base["summation_bound_max"] = summation["bound_max"]
    if "summation_bound" in traj.saved:
        # the largest bound met along the run: every saved diagnostic is within it
        base["summation_bound_max"] = max(base.get("summation_bound_max", 0.0),
                                          float(np.max(traj.saved["summation_bound"])))
        base["summation_fast_fraction"] = float(np.mean(traj.saved["summation_fast"]))
    if overflow:
        base["overflow"] = overflow
    base.update(netcdf_safe(attrs or {}))
    ds.attrs = netcdf_safe(base)
    return ds


def _event_variables(records, time_attrs: dict) -> dict:
    """The variables of a run's events (:class:`particles.events.EventRecord`): their times and states,
    each event's occurrences NaN-padded to the most of any, and their terminal and direction attrs."""
    if not records:
        return {}
    k = max(rec.t.shape[-1] for rec in records)
    pad = [((0, 0),) * (rec.t.ndim - 1) + ((0, k - rec.t.shape[-1]),) for rec in records]
    t = np.stack([np.pad(rec.t, p, constant_values=np.nan) for rec, p in zip(records, pad)])
    x = np.stack([np.pad(rec.x, p + ((0, 0),) * (rec.x.ndim - rec.t.ndim), constant_values=np.nan)
                  for rec, p in zip(records, pad)])
    lead = ("event",) + (("system",) if t.ndim == 3 else ()) + ("occurrence",)
    t_attrs = dict(time_attrs, long_name=f"time of the event's occurrence ({time_attrs['long_name']})",
                   comment="located on the step's interpolant; NaN past the event's last occurrence")
    return {"event_time": (lead, t, t_attrs),
            "event_positions": (lead + ("particle", "component"), x,
                                {"long_name": "token positions at the event's occurrence", "units": "1"}),
            "event_terminal": (("event",), np.array([rec.terminal for rec in records]),
                               {"long_name": "occurrence that stops the run (0: none)", "units": "1"}),
            "event_direction": (("event",), np.array([rec.direction for rec in records]),
                                {"long_name": "crossing direction counted (1 up, -1 down, 0 both)", "units": "1"})}


def _overflow_notes(data_vars: dict) -> str:
    """Say where a saved diagnostic is not finite: inf where its value is past the float64 range (as
    particles.diagnose documents), nan where two such values are subtracted (a residual of two infs). A ``comment``
    on each such variable, and the text of the Dataset's ``overflow`` attr ("" when every value is finite)."""
    names = []
    for name, (_, arr, var_attrs) in data_vars.items():
        arr = np.asarray(arr)
        if name == "positions" or not np.issubdtype(arr.dtype, np.floating) or np.isfinite(arr).all():
            continue
        names.append(name)
        said = [f"{what} at {int(test(arr.reshape(len(arr), -1)).any(axis=1).sum())} of {len(arr)} saves"
                for what, test in (("inf", np.isinf), ("nan", np.isnan)) if test(arr).any()]
        var_attrs["comment"] = (f"{' and '.join(said)}: the value is past the float64 range (|x| > 1.8e308; nan: "
                                "the difference of two such values)" + _FINITE.get(name, ""))
    if not names:
        return ""
    finite = "; log_energy holds the finite log of each head's energy" if "log_energy" in data_vars else ""
    return (f"{', '.join(names)} overflow float64 at some saves (inf where the value is past 1.8e308, nan where two "
            f"such values are subtracted), as at a large beta{finite}.")


#: where to read a finite counterpart of a diagnostic that overflows
_FINITE = {k: "; log_energy is the finite log of each head's energy" for k in ("energy", "energy_multi")}
_FINITE.update({k: "; the rate's size is of the energy's, whose log is log_energy (log_time_scale = 'auto' measures "
                   "USA heads in units where both are finite)" for k in ("energy_rate", "head_energy_rate",
                                                                         "rate_residual")})


def _same_model(traj, model) -> None:
    """Refuse to label a run with a model other than the one simulated (their fingerprints differ)."""
    if model is None or not traj.fingerprint:
        return
    other = field_fingerprint(model)
    if other != traj.fingerprint:
        raise InvalidParameterError(
            f"model of trajectory_to_dataset is not the model that was simulated (fingerprint {other} against the "
            f"trajectory's {traj.fingerprint}): the dataset would record another model's kind, beta and heads. "
            "Pass the model given to particles.simulate (or model=None)."
        )


def time_coord(ts, log_time_scale=None) -> tuple:
    """The ``time`` coordinate ``("time", ts, attrs)`` of runs whose model has ``log_time_scale`` c.

    The solver integrates :math:`dx/dt' = e^{-c} v(x)`, i.e. in the rescaled time :math:`t' = e^{c} t`
    of the physical time t. ``c = 0``: ``long_name`` "time" (the physical time); ``c != 0``:
    ``long_name`` "rescaled time t' = e^c t, c = <c>" and a ``comment`` giving t = e^{-c} t'. The
    ``log_time_scale`` attr records c (a float); ``None`` (model unknown) records nothing, and an
    array of per-cell values that differ (a sweep over beta with ``"auto"``) records ``"per cell"``:
    the dataset's ``log_time_scale`` variable holds them.

    >>> time_coord([0.0, 1.0], 0.0)[2]
    {'units': '1', 'long_name': 'time', 'log_time_scale': 0.0}
    >>> time_coord([0.0, 1.0], 2.0)[2]["long_name"]
    "rescaled time t' = e^c t, c = 2"
    """
    attrs = {"units": "1", "long_name": "time"}
    if log_time_scale is not None:
        c = np.unique(np.asarray(log_time_scale, dtype=float).ravel())
        if c.size > 1:
            attrs["long_name"] = "rescaled time t' = e^c t, c per cell (variable log_time_scale)"
            attrs["log_time_scale"] = "per cell"
        elif c.size == 1:
            c = float(c[0])
            if c != 0.0:
                attrs["long_name"] = f"rescaled time t' = e^c t, c = {c:.6g}"
                attrs["comment"] = ("integrated as dx/dt' = e^-c v(x) (log_time_scale = c); the physical time of "
                                    "the dynamics is t = e^-c t'")
            attrs["log_time_scale"] = c
    return ("time", np.asarray(ts, dtype=float), attrs)


def time_index(ds: xr.Dataset, t, caller: str = "ds.attn", dim: str = "time") -> int:
    """Index of the saved time equal to ``t`` (by value, to within 1e-9 of the saved span).

    A time outside the saved range, or between two saved times, is an error naming the saved
    times: nothing snaps silently to the nearest save.

    >>> import xarray as xr
    >>> ds = xr.Dataset(coords={"time": [0.0, 0.5, 1.0]})
    >>> time_index(ds, 0.5)
    1
    >>> time_index(ds, 99.0)
    Traceback (most recent call last):
    ...
    particles.validation.InvalidParameterError: time 99.0 of ds.attn is outside the saved times [0, 1] ...
    """

    if dim not in ds.coords:
        raise InvalidParameterError(f"{caller} needs a {dim!r} coordinate; the Dataset has {sorted(ds.coords)}.")
    ts = np.asarray(ds[dim].values, dtype=np.float64)
    shown = ", ".join(f"{v:g}" for v in ts[:8]) + (", ..." if len(ts) > 8 else "")
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not np.isfinite(t):
        raise InvalidParameterError(f"time of {caller} must be a finite number (a saved time, by value); got {t!r}.")
    tol = 1e-9 * max(1.0, float(ts.max() - ts.min()))
    if not ts.min() - tol <= t <= ts.max() + tol:
        raise InvalidParameterError(
            f"time {t!r} of {caller} is outside the saved times [{ts.min():g}, {ts.max():g}] (saved: {shown}); "
            "times are selected by value, not by position: use ds.time.values[-1] for the last save.")
    k = int(np.argmin(np.abs(ts - t)))
    if abs(ts[k] - t) > tol:
        raise InvalidParameterError(
            f"time {t!r} of {caller} is not a saved time (nearest {ts[k]:g}; saved: {shown}); pass one of them.")
    return k
