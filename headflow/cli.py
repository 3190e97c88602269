"""The ``headflow`` command line: ``simulate``, ``sweep``, ``study``, ``info``, ``verify``, ``flagship`` (the main job).

Each run command reads a TOML config (``headflow <command> --example`` prints a complete one),
shows a tqdm progress bar and writes one dataset (netCDF, or zarr with ``--format zarr``)
whose attrs carry the full config, the versions and the seeds (:func:`metrics.provenance`).

Contract:

1. **Checked configs.** A config is read within bounds (its bytes, its nesting, its heads:
   :mod:`headflow._bounds`). Unknown sections or keys are errors naming the valid ones (a typo
   never passes silently); every value is checked against its type and range (:data:`TYPES`)
   before any work, and an error names the TOML key (``[study] n_values[1] = "64": must be an
   integer >= 1; got a string``), exit status 2; missing keys take the defaults printed by
   ``--example``.
2. **Resumable.** ``sweep`` and ``study`` keep one file per finished cell in their store folder
   (:func:`metrics.run_sweep`'s own mechanism): rerunning an interrupted run computes only
   the missing cells. ``simulate`` is a single unit of work. When the output exists and was
   made from the same config, the command reports it and does nothing; an output made from
   another config is refused unless ``--force``.
3. **No file of a user's is touched.** The output path is checked before any work (a UTF-8 name
   the file system can hold, not under a regular file, its folder writable); ``--force`` replaces
   only a dataset headflow itself wrote (recognised by its provenance attrs) and refuses anything
   else (:mod:`headflow._output`).
4. **Atomic outputs.** Datasets are written to a temporary name, then renamed, so a killed
   run never leaves an output that looks complete. Ctrl-C stops with a message and exit
   status 130; the finished cells stay in the store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
import warnings

from ._budget import check_simulate_memory, check_study_memory, check_sweep_memory
from ._config import (  # noqa: F401  (the config API is part of this module's namespace)
    EXAMPLES,
    MODEL_FIELDS,
    SCHEMAS,
    ConfigError,
    load_config,
    toml_words,
)
from ._info import _print_info, info  # noqa: F401  (cli.info is public)
from ._models import build_density, build_model, build_sweep_model, check_run
from ._output import VERIFY_HELP, check_output, output_path, verify, write_output
from ._resume import Interrupted, computed_cells, keeping, resume_note
from ._work import check_simulate_time, check_study_time, check_sweep_time
from .scripts import add_arguments


def __getattr__(name):
    if name == "TYPES":  # built on first use from the library's declarations (headflow._config)
        from . import _config

        return _config.TYPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main", "load_config", "run_simulate", "run_sweep_config", "run_study", "info", "ConfigError",
           "Interrupted", "EXAMPLES", "SCHEMAS", "TYPES"]  # noqa: F822 (TYPES: lazy)


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
    path = output_path(path, fmt)
    named = {".zarr": "zarr", ".nc": "netcdf", ".nc4": "netcdf"}.get(path.suffix.lower())
    if named is not None and named != fmt:
        # a netCDF file named .zarr (or the reverse) would open in neither reader as its name says
        raise ConfigError(f"output {str(path)!r} is named as {named} but the format is {fmt} ([output] format or "
                          f"--format): pass --format {named}, or give the output a name that ends in "
                          f"{'.zarr' if fmt == 'zarr' else '.nc'}.")
    return path, fmt


# ---------------------------------------------------------------- commands


def _start(cfg: dict, out, fmt, force: bool):
    """Output path, format and public config of a run; ``path`` is None when an output with
    the same config already exists (nothing to do)."""
    from metrics.io import to_json

    path, fmt = _output_path(cfg, out, fmt)
    config = _public(cfg)
    if check_output(path, fmt, to_json(config), force, cfg):
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
    check_simulate_memory(cfg, out=path)
    model = build_model(cfg["model"])
    run, include = cfg["run"], check_run(cfg["run"])
    method, kappa = run["method"], float(run["kappa"])
    check_simulate_time(cfg, model)  # before the tokens are drawn: a run too long is refused, a long one says so
    streams = particles.seed_streams(run["seed"])  # the one seed rule, shared with the docs
    x0 = particles.sample_uniform(int(run["n"]), d=model.d, rng=streams.x0)
    traj = particles.simulate(
        x0, model, t1=float(run["t1"]), dt=float(run["dt"]), method=method, kappa=kappa, rng=streams.noise,
        save=particles.SaveAt(ts=np.linspace(0.0, float(run["t1"]), int(run["n_saves"])), x=bool(run["positions"]),
                              fn=None if include == [] else lambda t, x: particles.diagnose(model, x, include=include)),
        progress=progress, on_failure="return",
    )
    ds = metrics.trajectory_to_dataset(traj, model, title="headflow simulate", config=config,
                                       seeds={"seed": run["seed"], "entropy": str(run["seed"]),
                                              "children": "particles.seed_streams(seed): SeedSequence(seed)"
                                                          ".spawn(2): x0, noise"})
    write_output(ds, path, fmt)
    print(f"wrote {path} ({traj.status}, {traj.n_steps} steps)")
    _say_summation(ds)
    if ds.attrs.get("overflow"):  # a diagnostic past float64 is inf: say which, and where the finite one is
        print(f"headflow simulate: note: {ds.attrs['overflow']}", file=sys.stderr)
    if traj.status != "finished":  # the reason (and its fix) is in the dataset's attrs; say it here too
        print(f"headflow simulate: the run {traj.status}: {toml_words(traj.message)}", file=sys.stderr)
    return ds


def run_sweep_config(cfg: dict, *, out=None, fmt=None, progress: bool = True, force: bool = False):
    """``headflow sweep``: :func:`metrics.run_sweep` with a store folder (resumable)."""
    import metrics
    from metrics.io import to_json

    path, fmt = _output_path(cfg, out, fmt)
    sw = cfg["sweep"]
    store = sw["store"] or str(path) + ".cells"
    config = _public(cfg)
    if check_output(path, fmt, to_json(config), force, cfg):
        print(f"{path} is up to date (same config); nothing to do.")
        return None
    if not isinstance(sw["grid"], dict) or not sw["grid"]:
        raise ConfigError("[sweep] grid must be a non-empty table of parameter = [values].")
    if sw["engine"] not in ("serial", "process"):
        raise ConfigError(f"[sweep] engine must be 'serial' or 'process'; got {sw['engine']!r}.")
    check_sweep_memory(cfg, out=path)
    check_sweep_time(cfg)  # before any cell: a sweep too long is refused, a long one says so
    model_fn, fixed = build_sweep_model(cfg["model"], sw["grid"])
    before = resume_note(store)
    with keeping(store):
        ds = metrics.run_sweep(
            sw["grid"], n_seeds=int(sw["n_seeds"]), seed=sw["seed"], t1=float(sw["t1"]), dt=float(sw["dt"]),
            n_saves=int(sw["n_saves"]), method=sw["method"], kappa=float(sw["kappa"]), metrics=tuple(sw["metrics"]),
            engine=sw["engine"], max_workers=sw["max_workers"], store=store, progress=progress,
            model_fn=model_fn, fixed=fixed or None,
        )
        ds.attrs["sweep_config"] = ds.attrs["config"]  # run_sweep's own record of its arguments
        ds.attrs["config"] = to_json(config)
        ds.attrs["title"] = "headflow sweep"
        write_output(ds, path, fmt)
    computed = computed_cells(store, before)
    print(f"wrote {path} ({int(ds.success.sum())}/{ds.success.size} cells reached t1; {ds.success.size - computed} "
          f"reused, {computed} computed); cells kept in {store}")
    _say_summation(ds)
    return ds


def _say_summation(ds) -> None:
    """The accuracy of the sums, seen at the end of a run: the route of each head and the largest bound."""
    if "summation_bound_max" in ds.attrs:
        print(f"summation: {ds.attrs.get('summation_route', 'exact')} per head; largest relative error bound of a "
              f"partition function {ds.attrs['summation_bound_max']:.2g} (0: exact sums)")


def run_study(cfg: dict, *, out=None, fmt=None, progress: bool = True, force: bool = False):
    """``headflow study``: :func:`metrics.mean_field_limit_study` on S^{d-1} with the [density]
    table's initial density; finished cells are kept in ``store`` (a rerun resumes)."""
    import metrics
    from metrics.io import to_json

    path, fmt, config = _start(cfg, out, fmt, force)
    if path is None:
        return None
    from particles.extend import MEAN_FIELD_KINDS

    if cfg["model"]["kind"] not in MEAN_FIELD_KINDS:
        kinds = " or ".join(f'"{k}"' for k in MEAN_FIELD_KINDS)
        raise ConfigError(f"[model] kind = {cfg['model']['kind']!r}: the study needs {kinds} (the kinds the mean-field "
                          "solvers accept).")
    check_study_memory(cfg, out=path)
    model = build_model(cfg["model"], study=True)
    st = cfg["study"]
    if st["dt"] > st["t1"]:
        raise ConfigError(f"[study] dt = {st['dt']} must be <= t1 = {st['t1']}.")
    rho = build_density(cfg["density"], model.d)
    check_study_time(cfg, model)
    store = st["store"] or str(path) + ".cells"
    before = resume_note(store)
    with keeping(store):
        ds = metrics.mean_field_limit_study(
            model, rho, n_values=tuple(st["n_values"]), n_seeds=st["n_seeds"], t1=st["t1"], n_saves=st["n_saves"],
            m_grid=st["m_grid"], dt=st["dt"], seed=st["seed"], kappa=st["kappa"], n_reference=st["n_reference"],
            n_projections=st["n_projections"], sampling=st["sampling"], engine=st["engine"],
            max_workers=st["max_workers"], store=store, progress=progress,
        )
        ds.attrs["study_config"] = ds.attrs["config"]
        ds.attrs["config"] = to_json(config)
        ds.attrs["title"] = f"headflow study: particles against the mean-field reference on S^{model.d - 1}"
        ds.attrs["density"] = repr(rho)
        write_output(ds, path, fmt)
    print(f"wrote {path} ({computed_cells(store, before)} cell(s) computed); cells kept in {store}")
    print(metrics.limit_study_table(ds))
    return ds


# ---------------------------------------------------------------- entry point

_RUNNERS = {"simulate": run_simulate, "sweep": run_sweep_config, "study": run_study}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headflow", description="Multi-head attention dynamics on the sphere.")
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{simulate,sweep,study,info,verify,flagship}")
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
    p = sub.add_parser("verify", help=VERIFY_HELP, description=f"headflow verify: {VERIFY_HELP}.")
    p.add_argument("path", help="output file or folder, or store folder")
    text = "the flagship study (datasets and figures; the README's main job, no repository needed)"
    add_arguments(sub.add_parser("flagship", help=text, description=f"headflow flagship: {text}."))
    return parser


@contextlib.contextmanager
def _plain_warnings(command: str):
    """Warnings as one line, ``headflow <command>: <Category>: <message>``: a user of the command line
    reads what happened, not the library's source file and line that raised it."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"headflow {command}: {category.__name__}: {message}", file=sys.stderr if file is None else file)

    saved = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 when a solver refuses the run, 2 for a config
    error, 130 on Ctrl-C)."""
    args = _parser().parse_args(argv)
    from particles.validation import InvalidParameterError, SolverError
    if args.command == "info":
        data = info()
        print(json.dumps(data, indent=2)) if args.json else _print_info(data)
        return 0
    if args.command == "verify":
        return verify(args.path)
    if args.command == "flagship":
        from .flagship import main as flagship
        flagship(["--out", args.out] + (["--quick"] if args.quick else []))
        return 0
    if args.example:
        print(EXAMPLES[args.command], end="")
        return 0
    if args.config is None:
        print(f"headflow {args.command}: error: give a config file (`headflow {args.command} --example` prints one).",
              file=sys.stderr)
        return 2
    from metrics.io import DiskFullError

    try:
        cfg = load_config(args.command, pathlib.Path(args.config))
        with _plain_warnings(args.command):
            _RUNNERS[args.command](cfg, out=args.out, fmt=args.format, progress=not args.no_progress,
                                   force=args.force)
    except (ConfigError, InvalidParameterError) as exc:  # a bad value in the config: say which, no traceback
        print(f"headflow {args.command}: error: {toml_words(str(exc), args.command)}", file=sys.stderr)
        return 2
    except SolverError as exc:  # e.g. a study's reference that cannot be computed: the reason and its fix
        print(f"headflow {args.command}: the run failed: {toml_words(str(exc))}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        print(f"\nheadflow {args.command}: {exc}", file=sys.stderr)
        return 130
    except DiskFullError as exc:  # a full disk, a quota or a size limit: the path, and what was kept
        print(f"headflow {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader of the output went away (`| head`, `| grep -q`): stop without a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (and none at the exit's flush)
        return 141
    except KeyboardInterrupt:  # outputs are written atomically: nothing half-written is left
        print(f"\nheadflow {args.command}: interrupted; no output was written.", file=sys.stderr)
        return 130
    return 0
