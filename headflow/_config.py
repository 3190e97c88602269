"""The configs of the ``headflow`` commands: sections and defaults (:data:`SCHEMAS`), the type and
range of every value (:data:`TYPES`), complete examples (:data:`EXAMPLES`) and :func:`load_config`.

Import-light on purpose (no numpy): ``headflow --help`` and config errors stay fast.
"""

from __future__ import annotations

import copy
import os
import pathlib
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = ["ConfigError", "SCHEMAS", "TYPES", "EXAMPLES", "MODEL_FIELDS", "load_config"]  # noqa: F822 (TYPES: lazy)


class ConfigError(ValueError):
    """A config file that cannot be run as written; the message names the fix."""


#: the [model] keys that are constructor fields of particles.MultiHead, passed to it as they are:
#: every init field but the arrays M and W (tests/metrics/test_model_record.py fails when MultiHead gains a
#: field this list or its type lacks); d, lambdas, M and W say how the heads are built
MODEL_FIELDS = ("beta", "kind", "geometry", "log_time_scale", "block_elements", "summation", "tol", "causal",
                "update")
_MODEL = {"kind": "usa", "geometry": "sphere", "d": 3, "beta": 2.0, "lambdas": [1.0, 0.4], "M": None, "W": None,
          "log_time_scale": 0.0, "summation": "auto", "tol": 1e-10, "block_elements": 2**18, "causal": False,
          "update": "standard"}
_OUTPUT = {"path": None, "format": "netcdf"}

#: every section, key and default of each command's config
SCHEMAS = {
    "simulate": {
        "model": _MODEL,
        "run": {"n": 64, "t1": 10.0, "dt": 0.02, "method": "rk4", "n_saves": 51, "seed": 0, "kappa": float("inf"),
                "positions": True, "diagnostics": None, "max_hours": 24.0},
        "output": _OUTPUT,
    },
    "sweep": {
        "model": dict.fromkeys(_MODEL),  # None: not set (the sweep's defaults, metrics.default_model's heads)
        "sweep": {"grid": {"n_particles": [16, 32], "beta": [1.0, 4.0]}, "n_seeds": 2, "seed": 0, "t1": 10.0,
                  "dt": 0.05, "n_saves": 11, "method": "rk4", "kappa": float("inf"),
                  "metrics": ["n_clusters", "energy_multi", "mean_entropy"], "engine": "serial",
                  "max_workers": None, "store": None, "max_hours": 24.0},
        "output": _OUTPUT,
    },
    "study": {
        "model": dict(_MODEL, d=2, beta=3.0, lambdas=[1.0]),
        "study": {"n_values": [16, 32, 64, 128], "n_seeds": 4, "t1": 2.0, "n_saves": 5, "m_grid": 1024, "dt": 0.01,
                  "seed": 0, "kappa": float("inf"), "n_reference": None, "n_projections": 256,
                  "sampling": "independent", "engine": "serial", "max_workers": None, "store": None,
                  "max_hours": 24.0},
        "density": {"family": "cosine", "amplitude": 0.5, "mode": 2, "concentration": None, "expression": None},
        "output": _OUTPUT,
    },
}

def _own_types() -> dict:
    """The constraints of the keys no library parameter declares (the CLI's own: the model's lists,
    paths, the density family); the [model] keys that are MultiHead fields are typed by its declaration."""
    from particles.validation import Boolean, Instance, Integer, Interval, Options, SequenceOf

    from ._schema import Matrix

    text = Instance(str, test=str.strip, what="a non-empty string")
    hours = Interval(0, None, closed="neither", inf=True)
    model = {"d": Integer(2), "lambdas": SequenceOf(Interval()), "M": Matrix(), "W": Matrix()}
    output = {"path": text, "format": Options("netcdf", "zarr")}
    return {
        "simulate": {"model": model, "output": output,
                     "run": {"n": Integer(1), "positions": Boolean(), "diagnostics": SequenceOf(text, min_len=0),
                             "max_hours": hours}},
        "sweep": {"model": model, "sweep": {"store": text, "max_hours": hours}, "output": output},
        "study": {"model": model, "study": {"store": text, "max_hours": hours}, "output": output,
                  "density": {"family": Options(*_density_keys()), "expression": text}},
    }


#: (command, section) -> (module, callable, keys): each key is typed by the declaration of the
#: parameter of that name (particles.validation.declare), so the CLI and the function check one rule;
#: [run] takes the constraints the studies share for the same quantities (as the limit study declares them)
_DECLARED = {
    **{(command, "model"): ("particles", "MultiHead", MODEL_FIELDS) for command in ("simulate", "sweep", "study")},
    ("simulate", "run"): ("metrics", "mean_field_limit_study", ("t1", "dt", "n_saves", "seed", "kappa")),
    ("sweep", "sweep"): ("metrics", "run_sweep", ("grid", "n_seeds", "seed", "t1", "dt", "n_saves", "method", "kappa",
                                                  "engine", "max_workers", "metrics")),
    ("study", "study"): ("metrics", "mean_field_limit_study",
                         ("n_values", "n_seeds", "t1", "n_saves", "m_grid", "dt", "seed", "kappa", "n_reference",
                          "n_projections", "sampling", "engine", "max_workers")),
    ("study", "density"): ("metrics", "FamilyDensity", ("amplitude", "mode", "concentration")),
}
_TYPES_CACHE: dict = {}


def _types() -> dict:
    """The constraint of every config value: :func:`_own_types` plus the keys typed by declarations
    (built on first use: the declarations live in the library, which ``--help`` need not import)."""
    if not _TYPES_CACHE:
        import importlib

        from particles.validation import declaration

        types = _own_types()
        for (command, section), (module, fn, keys) in _DECLARED.items():
            mod = importlib.import_module(module)
            constraints = declaration(getattr(mod, fn)).constraints
            found = {key: constraints[key] for key in keys}
            types[command][section].update(found)  # the declared constraint itself (strict for TOML)
        # the choice the library owns, read from it: a run's method
        from particles import STEPPERS
        from particles.validation import Options

        types["simulate"]["run"]["method"] = Options(*STEPPERS)
        _TYPES_CACHE.update(types)
    return _TYPES_CACHE


def __getattr__(name):
    if name == "TYPES":  # the type of every config value (checked before any work; errors name the TOML key)
        return _types()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
log_time_scale = 0.0      # 0: the physical time t (as particles.MultiHead); "auto": the rescaled time
                          # t' = e^c t, c = beta max_h ||M_h|| (USA heads at large beta: no overflow)
summation = "auto"        # "exact", "fast" (NUFFT, needs finufft) or "auto"
tol = 1e-10               # bound on the relative error of every partition function (fast/auto)
block_elements = 262144   # entries of one logit tile (memory per head pass)
causal = false            # token i attends to tokens j <= i only
update = "standard"       # layer update: "standard", "pre_ln", "post_ln" or "ngpt"

[run]
n = 64                    # number of tokens
t1 = 10.0
dt = 0.02
method = "rk4"            # "euler", "heun", "rk4", "dopri5", "euler_maruyama"
n_saves = 51
seed = 0                  # x0 and noise streams: particles.seed_streams(seed)
kappa = inf               # noise: generator kappa^-1 Laplacian (inf: none)
positions = true          # store the trajectory (time, particle, component)
# diagnostics = ["energy_multi", "kinetic", "entropy"]   # default: all of particles.DIAGNOSTICS; [] none
max_hours = 24.0          # a run estimated (timed before it starts) to take longer is refused

[output]
path = "run.nc"           # --out overrides
format = "netcdf"         # or "zarr"
""",
    "sweep": """\
# headflow sweep: grid x seeds, one stored file per finished cell (resumable)
[sweep]
grid = { n_particles = [16, 32], beta = [1.0, 4.0] }   # any of n_particles, beta, n_heads, kind, d, lambdas
# grid = { lambdas = [[1.0], [1.0, 0.5]], kind = ["usa", "softmax"] }   # scalar heads M_h = W_h = lambda_h I
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
max_hours = 24.0          # a sweep estimated (timed before it starts) to take longer is refused

[model]                   # the keys of `headflow simulate`'s [model]; each one set fixes it for every cell
# beta = 2.0              # beta, kind, d, lambdas: fixed values of what the grid does not sweep
# kind = "usa"            #   (default beta = 1, kind = "softmax", d = 3, n_particles = 32)
# d = 3
# lambdas = [1.0, 0.5]    # scalar heads M_h = W_h = lambda_h I; or M (and W) as nested lists
# log_time_scale = 0.0    # and the MultiHead options: geometry, summation, tol, block_elements, causal, update
# With no heads here or in the grid: random symmetric heads (metrics.default_model), recorded in the
# output's model_source attr; every cell's model is in its `model` variable.

[output]
path = "sweep.nc"
format = "netcdf"
""",
    "study": """\
# headflow study: particles against the mean-field reference, on S^1 (d = 2) or S^{d-1}
[model]
kind = "usa"              # "usa" or "softmax"
d = 2                     # tokens on S^{d-1}: d = 2 exact W1/W2, d >= 3 the sliced SW2, against the
                          # spectral reference (a Lagrangian one for non-zonal data in d >= 4)
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
# n_reference = 2048      # a Lagrangian reference's particles (default 16 max(n_values))
n_projections = 256       # d >= 3: directions of the sliced SW2
sampling = "independent"  # a fresh sample per (n, seed); "nested": shared streams, paired intervals
engine = "serial"         # or "process"
# max_workers = 2
# store = "study.cells"   # default: <output path>.cells (finished cells; a rerun resumes)
max_hours = 24.0          # a study estimated (timed before it starts) to take longer is refused

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


#: the library functions a command's sections feed, by section: their parameters are that section's keys
_SECTION_OF = {"run_sweep": "sweep", "mean_field_limit_study": "study"}


def toml_words(message: str, command: str | None = None) -> str:
    """A library message as a config's reader needs it: the Python keyword of a fix becomes its TOML key, and
    "The 'store' parameter of run_sweep" becomes "[sweep] store" where the command's section has that key."""
    message = message.replace("log_time_scale='auto'", '[model] log_time_scale = "auto"')
    sections = SCHEMAS.get(command, {})

    def key(m):
        section = _SECTION_OF[m.group(2)]
        return f"[{section}] {m.group(1)}" if m.group(1) in sections.get(section, {}) else m.group(0)

    return re.sub(r"The '(\w+)' parameter of (" + "|".join(_SECTION_OF) + r")\b", key, message)


def _density_keys() -> dict:
    """family -> the [density] keys it takes, read from the library's families (and the expression's)."""
    from metrics import FamilyDensity

    return {**FamilyDensity.FAMILIES, "expression": ("expression",)}


def _check_together(section: str, given: dict, defaults: dict) -> None:
    """Refuse keys of a section that are valid alone but not together."""
    if section == "model":  # the heads come from M (with W) or from lambdas, never from both
        if "W" in given and "M" not in given:
            raise ConfigError("[model] W needs M (the value matrices go with score matrices M).")
        if "M" in given and "lambdas" in given:
            raise ConfigError("[model] M and [model] lambdas both give the heads; keep one.")
    if section == "density":  # a key of another family would be ignored
        takes = _density_keys()
        family = given.get("family", defaults["family"])
        foreign = [k for k in given if k != "family" and k not in takes[family]]
        if foreign:
            owner = {k: f for f, keys in takes.items() for k in keys}
            shown = "; ".join(f"{k} is a key of family = {owner[k]!r}" for k in foreign)
            own = f"only {', '.join(takes[family])}" if takes[family] else "no other key"
            default = "" if "family" in given else " (the default)"
            one = len(foreign) == 1
            raise ConfigError(f"[density] {shown}, but family = {family!r}{default} takes {own}: "
                              f"{'it' if one else 'they'} would be ignored. Remove {', '.join(foreign)}, or set the "
                              f"family {'it belongs' if one else 'they belong'} to.")


def load_config(command: str, source) -> dict:
    """Read a TOML config (a path, or the TOML text as a str) for ``command``; check every value
    against :data:`TYPES` (a :class:`ConfigError` names the key) and fill in the defaults.

    A hostile file is refused within the bounds of :mod:`headflow._bounds` (its bytes, its nesting and its
    heads), each a :class:`ConfigError` naming the number found and the bound.

    Examples
    --------
    >>> cfg = load_config("simulate", '[run]\\nn = 8')
    >>> cfg["run"]["n"], cfg["run"]["method"], cfg["model"]["kind"]
    (8, 'rk4', 'usa')
    """
    from ._bounds import check_depth, check_heads, read_config

    schema = SCHEMAS[command]
    if isinstance(source, os.PathLike):  # a path; a str is the TOML text itself
        path = pathlib.Path(source)
        if path.is_dir():
            raise ConfigError(f"config file {str(path)!r} is a folder, not a file; pass the TOML file itself "
                              f"(`headflow {command} --example > run.toml` writes one).")
        if not path.exists():  # (a pipe or <(...) is no regular file, yet exists and reads as one)
            raise ConfigError(f"config file {str(path)!r} does not exist; `headflow {command} --example` prints one.")
        try:
            text = read_config(path, command, ConfigError).decode("utf-8")  # TOML is UTF-8 by definition
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not UTF-8 text (byte {exc.start}: "
                              f"{exc.object[exc.start:exc.start + 1]!r}); TOML files must be UTF-8. Save it as "
                              "UTF-8, or start from `headflow " + command + " --example`.") from None
        except OSError as exc:
            raise ConfigError(f"config file {str(path)!r} cannot be read ({exc.strerror or exc}).") from None
    else:
        text = str(source)
    if text.startswith("\ufeff"):  # a byte-order mark (Windows editors): TOML has none, the text is what follows
        text = text[1:]
        print("headflow: note: the config starts with a UTF-8 byte-order mark; it was ignored.", file=sys.stderr)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config is not valid TOML: {exc}.") from None
    except RecursionError:  # (tomllib recurses once per level of arrays and inline tables)
        raw = None
    check_depth(raw, command, ConfigError)
    check_heads(raw, ConfigError)  # (before the values are checked one by one: a million heads take seconds)
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
        from ._schema import check_section

        given = check_section(section, given, _types()[command][section], ConfigError)
        _check_together(section, given, defaults)
        cfg[section] = {**copy.deepcopy(defaults), **given}
    return cfg


