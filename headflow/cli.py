"""The ``headflow`` command line: ``simulate``, ``sweep``, ``study`` and ``info``.

Each run command reads a TOML config (``headflow <command> --example`` prints a complete one),
shows a tqdm progress bar and writes one dataset (netCDF, or zarr with ``--format zarr``)
whose attrs carry the full config, the versions and the seeds (:func:`metrics.provenance`).

Contract:

1. **Checked configs.** Unknown sections or keys are errors naming the valid ones (a typo
   never passes silently); every value is checked against its type and range (:data:`TYPES`)
   before any work, and an error names the TOML key (``[study] n_values[1] = "64": must be an
   integer >= 1; got a string``), exit status 2; missing keys take the defaults printed by
   ``--example``.
2. **Resumable.** ``sweep`` and ``study`` keep one file per finished cell in their store folder
   (:func:`metrics.run_sweep`'s own mechanism): rerunning an interrupted run computes only
   the missing cells. ``simulate`` is a single unit of work. When the output exists and was
   made from the same config, the command reports it and does nothing; an output made from
   another config is refused unless ``--force``.
3. **Atomic outputs.** Datasets are written to a temporary name, then renamed, so a killed
   run never leaves an output that looks complete. Ctrl-C stops with a message and exit
   status 130; the finished cells stay in the store.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import shutil
import sys

from . import _schema as S

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = ["main", "load_config", "run_simulate", "run_sweep_config", "run_study", "info", "ConfigError",
           "Interrupted", "EXAMPLES", "SCHEMAS", "TYPES"]


class ConfigError(ValueError):
    """A config file that cannot be run as written; the message names the fix."""


_MODEL = {"kind": "usa", "geometry": "sphere", "d": 3, "beta": 2.0, "lambdas": [1.0, 0.4], "M": None, "W": None,
          "log_time_scale": "auto", "summation": "auto", "tol": 1e-10}
_OUTPUT = {"path": None, "format": "netcdf"}

#: every section, key and default of each command's config
SCHEMAS = {
    "simulate": {
        "model": _MODEL,
        "run": {"n": 64, "t1": 10.0, "dt": 0.02, "method": "rk4", "n_saves": 51, "seed": 0, "kappa": float("inf"),
                "positions": True, "diagnostics": None},
        "output": _OUTPUT,
    },
    "sweep": {
        "sweep": {"grid": {"n_particles": [16, 32], "beta": [1.0, 4.0]}, "n_seeds": 2, "seed": 0, "t1": 10.0,
                  "dt": 0.05, "n_saves": 11, "method": "rk4", "kappa": float("inf"),
                  "metrics": ["n_clusters", "energy_multi", "mean_entropy"], "engine": "serial",
                  "max_workers": None, "store": None},
        "output": _OUTPUT,
    },
    "study": {
        "model": dict(_MODEL, d=2, beta=3.0, lambdas=[1.0]),
        "study": {"n_values": [16, 32, 64, 128], "n_seeds": 4, "t1": 2.0, "n_saves": 5, "m_grid": 1024, "dt": 0.01,
                  "seed": 0, "kappa": float("inf"), "n_reference": None, "n_projections": 256,
                  "sampling": "independent", "engine": "serial", "max_workers": None, "store": None},
        "density": {"family": "cosine", "amplitude": 0.5, "mode": 2, "concentration": None, "expression": None},
        "output": _OUTPUT,
    },
}

_KINDS = ("usa", "softmax", "relu", "relu_rownorm")
_METHODS = ("euler", "heun", "rk4", "dopri5", "euler_maruyama")
_DIAGNOSTICS = ("cos_angle", "energy", "energy_multi", "energy_rate", "entropy", "head_energy_rate", "kinetic",
                "log_energy", "radial_shadow", "rate_residual", "rd_margin", "rd_margin_min", "summation_bound",
                "summation_fast")
_METRIC_NAMES = ("distance_to_uniform", "energy_multi", "largest_cluster", "log_energy_multi", "mean_entropy",
                 "n_clusters")
_T_MODEL = {"kind": S.Str(_KINDS), "geometry": S.Str(("sphere", "flat")), "d": S.Int(2), "beta": S.Float(0.0),
            "lambdas": S.ListOf(S.Float()), "M": S.Matrix(), "W": S.Matrix(),
            "log_time_scale": S.Either(S.Str(("auto",)), S.Float(0.0, open_low=True)),
            "summation": S.Str(("auto", "exact", "fast")), "tol": S.Float(0.0, open_low=True, high=1.0)}
_T_OUTPUT = {"path": S.Str(), "format": S.Str(("netcdf", "zarr"))}

#: the type of every config value (checked before any work; errors name the TOML key)
TYPES = {
    "simulate": {
        "model": _T_MODEL,
        "run": {"n": S.Int(1), "t1": S.Float(0.0, open_low=True), "dt": S.Float(0.0, open_low=True),
                "method": S.Str(_METHODS), "n_saves": S.Int(1), "seed": S.Int(0),
                "kappa": S.Float(0.0, open_low=True, inf=True), "positions": S.Bool(),
                "diagnostics": S.ListOf(S.Str(), min_len=0)},
        "output": _T_OUTPUT,
    },
    "sweep": {
        "sweep": {"grid": S.Table({"n_particles": S.ListOf(S.Int(1)), "beta": S.ListOf(S.Float(0.0)),
                                   "n_heads": S.ListOf(S.Int(1)), "kind": S.ListOf(S.Str(_KINDS)),
                                   "d": S.ListOf(S.Int(2))}),
                  "n_seeds": S.Int(1), "seed": S.Int(0), "t1": S.Float(0.0, open_low=True),
                  "dt": S.Float(0.0, open_low=True), "n_saves": S.Int(2), "method": S.Str(_METHODS),
                  "kappa": S.Float(0.0, open_low=True, inf=True), "metrics": S.ListOf(S.Str(_METRIC_NAMES)),
                  "engine": S.Str(("serial", "process")), "max_workers": S.Int(1), "store": S.Str()},
        "output": _T_OUTPUT,
    },
    "study": {
        "model": _T_MODEL,
        "study": {"n_values": S.ListOf(S.Int(1), min_len=2, increasing=True), "n_seeds": S.Int(1),
                  "t1": S.Float(0.0, open_low=True), "n_saves": S.Int(1), "m_grid": S.Int(8),
                  "dt": S.Float(0.0, open_low=True), "seed": S.Int(0), "kappa": S.Float(0.0, open_low=True, inf=True),
                  "n_reference": S.Int(2), "n_projections": S.Int(1), "sampling": S.Str(("independent", "nested")),
                  "engine": S.Str(("serial", "process")), "max_workers": S.Int(1), "store": S.Str()},
        "density": {"family": S.Str(("uniform", "cosine", "von_mises", "expression")),
                    "amplitude": S.Float(0.0, high=1.0), "mode": S.Int(0), "concentration": S.Float(0.0, high=700.0),
                    "expression": S.Str()},
        "output": _T_OUTPUT,
    },
}

#: a complete, commented config per command (what ``--example`` prints)
EXAMPLES = {
    "simulate": """\
# headflow simulate: one particle run
[model]
kind = "usa"              # "usa", "softmax", "relu" or "relu_rownorm"
geometry = "sphere"       # or "flat"
d = 3                     # ambient dimension: tokens on S^{d-1}
beta = 2.0                # inverse temperature
lambdas = [1.0, 0.4]      # scalar heads M_h = W_h = lambda_h I; or give M (and W) as nested lists
log_time_scale = "auto"   # USA heads: integrate in rescaled time (no overflow)
summation = "auto"        # "exact", "fast" (NUFFT, needs finufft) or "auto"
tol = 1e-10               # bound on the relative error of every partition function (fast/auto)

[run]
n = 64                    # number of tokens
t1 = 10.0
dt = 0.02
method = "rk4"            # "euler", "rk4", "dopri5", "euler_maruyama"
n_saves = 51
seed = 0                  # initial tokens and noise come from SeedSequence(seed)
kappa = inf               # noise: generator kappa^-1 Laplacian (inf: none)
positions = true          # store the trajectory (time, particle, component)
# diagnostics = ["energy_multi", "kinetic", "entropy"]   # default: all of particles.DIAGNOSTICS

[output]
path = "run.nc"           # --out overrides
format = "netcdf"         # or "zarr"
""",
    "sweep": """\
# headflow sweep: grid x seeds, one stored file per finished cell (resumable)
[sweep]
grid = { n_particles = [16, 32], beta = [1.0, 4.0] }   # any of n_particles, beta, n_heads, kind, d
n_seeds = 2
seed = 0
t1 = 10.0
dt = 0.05
n_saves = 11
method = "rk4"
kappa = inf
metrics = ["n_clusters", "energy_multi", "mean_entropy"]
engine = "serial"         # or "process"
# max_workers = 2
# store = "sweep.cells"   # default: <output path>.cells

[output]
path = "sweep.nc"
format = "netcdf"
""",
    "study": """\
# headflow study: particles against the mean-field reference, on S^1 (d = 2) or S^{d-1}
[model]
kind = "usa"              # "usa" or "softmax"
d = 2                     # tokens on S^{d-1}: d = 2 uses the fv_circle reference and exact W1/W2,
                          # d >= 3 a Lagrangian reference and the sliced SW2
beta = 3.0
lambdas = [1.0]

[study]
n_values = [16, 32, 64, 128]
n_seeds = 4
t1 = 2.0
n_saves = 5
m_grid = 1024             # cells of the S^1 grid (d = 2), or the grid bounding the density (d >= 3)
dt = 0.01
seed = 0
kappa = inf               # noise (inf: none)
# n_reference = 2048      # d >= 3: particles of the reference run (default 16 max(n_values))
n_projections = 256       # d >= 3: directions of the sliced SW2
sampling = "independent"  # a fresh sample per (n, seed); "nested": shared streams, paired intervals
engine = "serial"         # or "process"
# max_workers = 2
# store = "study.cells"   # default: <output path>.cells (finished cells; a rerun resumes)

[density]                 # the initial density, a function of the point x = (x1, ..., xd)
family = "cosine"         # 1 + amplitude cos(mode * angle(x, e1)); on S^1: 1 + amplitude cos(mode theta)
amplitude = 0.5
mode = 2
# family = "von_mises"    # exp(concentration (x1 - 1))
# concentration = 2.0
# family = "expression"   # an arithmetic expression of x1..xd (parsed, never eval'd)
# expression = "1 + 0.5 * x3"

[output]
path = "study.nc"
format = "netcdf"
""",
}


# ---------------------------------------------------------------- configs


def load_config(command: str, source) -> dict:
    """Read a TOML config (a path, or the TOML text as a str) for ``command``; check every value
    against :data:`TYPES` (a :class:`ConfigError` names the key) and fill in the defaults.

    Examples
    --------
    >>> cfg = load_config("simulate", '[run]\\nn = 8')
    >>> cfg["run"]["n"], cfg["run"]["method"], cfg["model"]["kind"]
    (8, 'rk4', 'usa')
    """
    schema = SCHEMAS[command]
    if isinstance(source, os.PathLike):  # a path; a str is the TOML text itself
        path = pathlib.Path(source)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist; `headflow {command} --example` prints one.")
        text = path.read_text()
    else:
        text = str(source)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config is not valid TOML: {exc}.") from None
    unknown = set(raw) - set(schema)
    if unknown:
        raise ConfigError(f"unknown section(s) {sorted(unknown)} in a {command} config; valid: {sorted(schema)}.")
    cfg = {}
    for section, defaults in schema.items():
        given = raw.get(section, {})
        if not isinstance(given, dict):
            raise ConfigError(f"[{section}] must be a table; got {given!r}.")
        bad = set(given) - set(defaults)
        if bad:
            raise ConfigError(f"unknown key(s) {sorted(bad)} in [{section}]; valid: {sorted(defaults)}.")
        given = S.check_section(section, given, TYPES[command][section], ConfigError)
        cfg[section] = {**copy.deepcopy(defaults), **given}
    return cfg


def _model(section: dict):
    import numpy as np

    import particles

    common = {"beta": float(section["beta"]), "kind": section["kind"], "geometry": section["geometry"],
              "log_time_scale": section["log_time_scale"], "summation": section["summation"],
              "tol": float(section["tol"])}
    if section["M"] is not None:
        W = None if section["W"] is None else np.asarray(section["W"], dtype=float)
        model = particles.MultiHead(np.asarray(section["M"], dtype=float), W, **common)
    else:
        model = particles.MultiHead.scalar(list(section["lambdas"]), d=int(section["d"]), **common)
    if model.d != int(section["d"]):
        raise ConfigError(f"[model] d = {section['d']} but M is {model.d} x {model.d}; make them agree.")
    return model


def _public(cfg: dict) -> dict:
    """The config recorded in a dataset: everything but where the output goes."""
    return {k: v for k, v in cfg.items() if k != "output"}


# ---------------------------------------------------------------- outputs


def _output_path(cfg: dict, out, fmt) -> tuple[pathlib.Path, str]:
    fmt = fmt or cfg["output"]["format"]
    if fmt not in ("netcdf", "zarr"):
        raise ConfigError(f"format must be 'netcdf' or 'zarr'; got {fmt!r}.")
    path = out or cfg["output"]["path"]
    if path is None:
        raise ConfigError("no output path: pass --out PATH or set [output] path in the config.")
    return pathlib.Path(path), fmt


def _existing_config(path: pathlib.Path, fmt: str) -> str | None:
    if not path.exists():
        return None
    import xarray as xr

    opener = (lambda p: xr.open_zarr(p, consolidated=False)) if fmt == "zarr" else xr.open_dataset
    try:
        with opener(path) as ds:
            return ds.attrs.get("config")
    except Exception:  # not a readable dataset: treat as foreign
        return "unreadable"


def _up_to_date(path: pathlib.Path, fmt: str, config_json: str, force: bool) -> bool:
    """True when ``path`` already holds the result of this config (nothing to do)."""
    existing = _existing_config(path, fmt)
    if existing is None or force:
        return False
    if existing == config_json:
        return True
    raise ConfigError(f"{str(path)!r} exists and was made from another config; pass --force to overwrite it "
                      "or choose another --out.")


def _write(ds, path: pathlib.Path, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".part{os.getpid()}")
    if fmt == "zarr":
        ds.to_zarr(tmp, mode="w", consolidated=False)  # consolidated metadata is not in the zarr v3 spec
    else:
        ds.to_netcdf(tmp)
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    os.replace(tmp, path)


# ---------------------------------------------------------------- commands


def _start(cfg: dict, out, fmt, force: bool):
    """Output path, format and public config of a run; ``path`` is None when an output with
    the same config already exists (nothing to do)."""
    from metrics.dataset import to_json

    path, fmt = _output_path(cfg, out, fmt)
    config = _public(cfg)
    if _up_to_date(path, fmt, to_json(config), force):
        print(f"{path} is up to date (same config); nothing to do.")
        return None, fmt, config
    return path, fmt, config


def run_simulate(cfg: dict, *, out=None, fmt=None, progress: bool = True, force: bool = False):
    """``headflow simulate``: one run; returns the Dataset (or ``None`` when already done)."""
    import numpy as np

    import metrics
    import particles

    path, fmt, config = _start(cfg, out, fmt, force)
    if path is None:
        return None
    model = _model(cfg["model"])
    run = cfg["run"]
    ss = np.random.SeedSequence(run["seed"])
    rng_x0, rng_noise = (np.random.default_rng(s) for s in ss.spawn(2))
    x0 = particles.sample_uniform(int(run["n"]), model.d, rng_x0)
    include = run["diagnostics"]
    if include is not None:
        for name in include:
            if name not in particles.DIAGNOSTICS:
                raise ConfigError(f"[run] diagnostics: {name!r} is not one of {sorted(particles.DIAGNOSTICS)}.")

    def save_fn(t, x):
        return particles.diagnose(model, x, include=include)

    method = run["method"]
    kappa = float(run["kappa"])
    if np.isfinite(kappa) and method != "euler_maruyama":
        raise ConfigError(f"[run] kappa = {kappa:g} adds noise: use method = \"euler_maruyama\" (got {method!r}).")
    traj = particles.simulate(
        x0, model, t1=float(run["t1"]), dt=float(run["dt"]), method=method, kappa=kappa, rng=rng_noise,
        save=particles.SaveAt(ts=np.linspace(0.0, float(run["t1"]), int(run["n_saves"])), x=bool(run["positions"]),
                              fn=save_fn),
        progress=progress, on_failure="return",
    )
    ds = metrics.trajectory_to_dataset(traj, model, title="headflow simulate", config=config,
                                       seeds={"seed": run["seed"], "entropy": str(ss.entropy),
                                              "children": "SeedSequence(seed).spawn(2): x0, noise"})
    _write(ds, path, fmt)
    print(f"wrote {path} ({traj.status}, {traj.n_steps} steps)")
    return ds


def run_sweep_config(cfg: dict, *, out=None, fmt=None, progress: bool = True, force: bool = False):
    """``headflow sweep``: :func:`metrics.run_sweep` with a store folder (resumable)."""
    import metrics
    from metrics.dataset import to_json

    path, fmt = _output_path(cfg, out, fmt)
    sw = cfg["sweep"]
    store = sw["store"] or str(path) + ".cells"
    config = _public(cfg)
    if _up_to_date(path, fmt, to_json(config), force):
        print(f"{path} is up to date (same config); nothing to do.")
        return None
    if not isinstance(sw["grid"], dict) or not sw["grid"]:
        raise ConfigError("[sweep] grid must be a non-empty table of parameter = [values].")
    if sw["engine"] not in ("serial", "process"):
        raise ConfigError(f"[sweep] engine must be 'serial' or 'process'; got {sw['engine']!r}.")
    n_done = len(list(pathlib.Path(store).glob("cell_*.nc"))) if pathlib.Path(store).is_dir() else 0
    if n_done:
        print(f"resuming: {n_done} finished cell file(s) in {store}")
    try:
        ds = metrics.run_sweep(
            sw["grid"], n_seeds=int(sw["n_seeds"]), seed=sw["seed"], t1=float(sw["t1"]), dt=float(sw["dt"]),
            n_saves=int(sw["n_saves"]), method=sw["method"], kappa=float(sw["kappa"]), metrics=tuple(sw["metrics"]),
            engine=sw["engine"], max_workers=sw["max_workers"], store=store, progress=progress,
        )
    except KeyboardInterrupt:
        n_done = len(list(pathlib.Path(store).glob("cell_*.nc"))) if pathlib.Path(store).is_dir() else 0
        raise Interrupted(f"interrupted; {n_done} finished cell file(s) are kept in {store}: rerun the same "
                          "command to resume.") from None
    ds.attrs["sweep_config"] = ds.attrs["config"]  # run_sweep's own record of its arguments
    ds.attrs["config"] = to_json(config)
    ds.attrs["title"] = "headflow sweep"
    _write(ds, path, fmt)
    print(f"wrote {path} ({int(ds.success.sum())}/{ds.success.size} cells reached t1); cells kept in {store}")
    return ds


def _study_density(dens: dict, d: int):
    """The [density] table as a picklable density_fn(points) on S^{d-1}; errors name the key."""
    import metrics

    family = dens["family"]
    try:
        if family == "expression":
            if dens["expression"] is None:
                raise ConfigError('[density] family = "expression" needs expression = "..." (a function of '
                                  f"x1..x{d}, e.g. \"1 + 0.5 * x{d}\").")
            rho = metrics.ExpressionDensity(dens["expression"], d)
        else:
            names = metrics.FamilyDensity.FAMILIES[family]
            missing = [k for k in names if dens[k] is None]
            if missing:
                raise ConfigError(f"[density] family = {family!r} needs {', '.join(missing)}.")
            rho = metrics.FamilyDensity(family, d, **{k: dens[k] for k in names})
        metrics.check_density_fn(rho, d, "the [density] table")
    except metrics.density.InvalidParameterError as exc:
        key = "expression" if family == "expression" else "family/parameters"
        raise ConfigError(f"[density] {key}: {exc}") from None
    return rho


class Interrupted(Exception):
    """Ctrl-C during a run; the message says what was kept and how to resume."""


def run_study(cfg: dict, *, out=None, fmt=None, progress: bool = True, force: bool = False):
    """``headflow study``: :func:`metrics.mean_field_limit_study` on S^{d-1} with the [density]
    table's initial density; finished cells are kept in ``store`` (a rerun resumes)."""
    import metrics
    from metrics.dataset import to_json

    path, fmt, config = _start(cfg, out, fmt, force)
    if path is None:
        return None
    if cfg["model"]["kind"] not in ("usa", "softmax"):
        raise ConfigError(f"[model] kind = {cfg['model']['kind']!r}: the study needs \"usa\" or \"softmax\" (the "
                          "kinds the mean-field solvers accept).")
    model = _model(cfg["model"])
    st = cfg["study"]
    if st["dt"] > st["t1"]:
        raise ConfigError(f"[study] dt = {st['dt']} must be <= t1 = {st['t1']}.")
    rho = _study_density(cfg["density"], model.d)
    store = st["store"] or str(path) + ".cells"
    n_done = len(list(pathlib.Path(store).glob("cell_*.nc"))) if pathlib.Path(store).is_dir() else 0
    if n_done:
        print(f"resuming: {n_done} finished cell file(s) in {store}")
    try:
        ds = metrics.mean_field_limit_study(
            model, rho, n_values=tuple(st["n_values"]), n_seeds=st["n_seeds"], t1=st["t1"], n_saves=st["n_saves"],
            m_grid=st["m_grid"], dt=st["dt"], seed=st["seed"], kappa=st["kappa"], n_reference=st["n_reference"],
            n_projections=st["n_projections"], sampling=st["sampling"], engine=st["engine"],
            max_workers=st["max_workers"], store=store, progress=progress,
        )
    except KeyboardInterrupt:
        n_done = len(list(pathlib.Path(store).glob("cell_*.nc"))) if pathlib.Path(store).is_dir() else 0
        raise Interrupted(f"interrupted; {n_done} finished cell file(s) are kept in {store}: rerun the same "
                          "command to resume.") from None
    ds.attrs["study_config"] = ds.attrs["config"]
    ds.attrs["config"] = to_json(config)
    ds.attrs["title"] = f"headflow study: particles against the mean-field reference on S^{model.d - 1}"
    ds.attrs["density"] = repr(rho)
    _write(ds, path, fmt)
    print(f"wrote {path}; cells kept in {store}")
    print(metrics.limit_study_table(ds))
    return ds


def info() -> dict:
    """``headflow info``: versions, thread counts and the available summation paths."""
    from metrics.dataset import dependency_versions, summation_paths

    threads = {"cpu_count": os.cpu_count()}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        threads[var] = os.environ.get(var, "unset")
    try:
        from threadpoolctl import threadpool_info

        threads["pools"] = [f"{p.get('internal_api')} ({p.get('user_api')}): {p.get('num_threads')}"
                            for p in threadpool_info()]
    except ImportError:
        threads["pools"] = ["threadpoolctl not installed"]
    return {"versions": dependency_versions(), "threads": threads, "summation": summation_paths(check_import=True)}


def _print_info(data: dict) -> None:
    print("headflow", data["versions"]["headflow"])
    print("\nversions")
    for k, v in data["versions"].items():
        print(f"  {k:20s} {v}")
    print("\nthreads")
    for k, v in data["threads"].items():
        if k == "pools":
            for pool in v:
                print(f"  {'pool':20s} {pool}")
        else:
            print(f"  {k:20s} {v}")
    print("\nsummation paths")
    notes = {"exact": 'blocked exact pass, O(n^2) work, error bound 0 (summation="exact")',
             "finufft": 'NUFFT routes of summation="fast"/"auto", error bound tol (needs the finufft package)'}
    for k, ok in data["summation"].items():
        print(f"  {k:20s} {'available' if ok else 'NOT available'}   {notes.get(k, '')}")


# ---------------------------------------------------------------- entry point

_RUNNERS = {"simulate": run_simulate, "sweep": run_sweep_config, "study": run_study}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headflow", description="Multi-head attention dynamics on the sphere.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{simulate,sweep,study,info}")
    helps = {"simulate": "one particle run", "sweep": "a resumable grid x seeds sweep",
             "study": "particles against the mean-field reference on S^{d-1} (resumable)"}
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=f"headflow {name}: {text}.")
        p.add_argument("config", nargs="?", help="TOML config file (see --example)")
        p.add_argument("--out", help="output path (overrides [output] path)")
        p.add_argument("--format", choices=["netcdf", "zarr"], help="output format (overrides [output] format)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.add_argument("--force", action="store_true", help="overwrite an output made from another config")
        p.add_argument("--example", action="store_true", help="print a complete example config and exit")
    p = sub.add_parser("info", help="versions, threads and summation paths")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 for a config error, 130 on Ctrl-C)."""
    args = _parser().parse_args(argv)
    from particles.validation import InvalidParameterError
    if args.command == "info":
        data = info()
        print(json.dumps(data, indent=2)) if args.json else _print_info(data)
        return 0
    if args.example:
        print(EXAMPLES[args.command], end="")
        return 0
    if args.config is None:
        print(f"headflow {args.command}: error: give a config file (`headflow {args.command} --example` prints one).",
              file=sys.stderr)
        return 2
    try:
        cfg = load_config(args.command, pathlib.Path(args.config))
        _RUNNERS[args.command](cfg, out=args.out, fmt=args.format, progress=not args.no_progress, force=args.force)
    except (ConfigError, InvalidParameterError) as exc:  # a bad value in the config: say which, no traceback
        print(f"headflow {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"\nheadflow {args.command}: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # outputs are written atomically: nothing half-written is left
        print(f"\nheadflow {args.command}: interrupted; no output was written.", file=sys.stderr)
        return 130
    return 0
