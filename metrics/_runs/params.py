"""The parameters the studies and sweeps share, each rule written once.

Every public study (:func:`metrics.mean_field_limit_study`, :func:`metrics.chaos_horizon_study`,
:func:`metrics.phase_diagram`, :func:`metrics.run_sweep`) declares its parameters from these
constraints (:func:`particles.validation.declare`); the command line's ``[study]`` and
``[sweep]`` keys take their types from the same objects.
"""

from __future__ import annotations

import os

from particles import KINDS, STEPPERS, MultiHead
from particles.extend import MEAN_FIELD_KINDS
from particles.validation import (
    KAPPA,  # noqa: F401  (the sweep and the studies declare kappa as P.KAPPA)
    NONE,
    AnyOf,
    Boolean,
    Instance,
    Integer,
    Interval,
    MappingOf,
    Options,
    Relation,
    SequenceOf,
)


def mean_field_model(spheres: tuple[int, ...] = (), hint: str | None = None) -> Instance:
    """The rule of a model the mean-field solvers take (the studies measure particles against them), on the
    spheres of dimensions ``spheres`` (d - 1; all when empty)."""
    where = f" on S^{' or S^'.join(map(str, spheres))}" if spheres else ""
    return Instance(MultiHead, test=lambda m: m.kind in MEAN_FIELD_KINDS and (not spheres or m.d - 1 in spheres)
                    and standard_flow(m),
                    what=f"a particles.MultiHead with kind 'usa' or 'softmax' (the kinds the mean-field solvers "
                         f"accept){where}, of the flow they solve: {STANDARD_FLOW_TEXT}", hint=hint)


#: the MultiHead options of the flow the mean-field equation describes (the studies' references solve it)
STANDARD_FLOW = {"causal": False, "geometry": "sphere", "update": "standard"}
STANDARD_FLOW_TEXT = "the standard update on the sphere without a causal mask (causal=False, geometry='sphere', " \
                     "update='standard')"


def standard_flow(model) -> bool:
    """Whether ``model`` runs the flow of the mean-field equation (:data:`STANDARD_FLOW`)."""
    return all(getattr(model, k) == v for k, v in STANDARD_FLOW.items())


POSITIVE = Interval(0, None, closed="neither")
T1 = Interval(0, None, closed="neither", hint="Pass the final time of the runs, e.g. t1=2.0.")
DT = Interval(0, None, closed="neither", hint="Pass the step size, a fraction of t1.")
N_SAVES = Integer(2, hint="The save times are np.linspace(0, t1, n_saves): at least t = 0 and t1.")
SEED = Integer(0, hint="Pass a non-negative integer (the root of the run's SeedSequence).")
N_VALUES = SequenceOf(Integer(1), min_len=2, increasing=True,
                      hint="Pass at least two strictly increasing particle numbers, e.g. (16, 32, 64).")
N_SEEDS = AnyOf(Integer(1), SequenceOf(Integer(1)),
                hint="Pass a positive integer, or one positive integer per n_values entry.")
EPS_CLUSTER = Interval(0, None, closed="neither", hint="The geodesic linking distance in radians, e.g. 1e-3.")
MAX_CLUSTERS = Integer(1, hint="The number of largest cluster masses kept, e.g. 8.")
N_PROJECTIONS = Integer(1)
N_BOOT = Integer(1)
ENGINE = AnyOf(Options("serial", "process"),
               Instance(object, test=lambda e: hasattr(e, "submit") and hasattr(e, "gather"),
                        what="a dask.distributed.Client"))
MAX_WORKERS = AnyOf(NONE, Integer(1))
STORE = AnyOf(NONE, Instance((str, os.PathLike), what="a folder path (str or os.PathLike)"))
PROGRESS = AnyOf(NONE, Boolean(), hint="None (default): a bar once the work has run 2 s; True: at once; False: never.")

DT_LE_T1 = Relation(("dt", "t1"), lambda dt, t1: dt <= t1, "must be <= t1 (one step at least)",
                    breaks={"dt": 2.0, "t1": 1.0})
#: the steps one run may take: particles.simulate's default max_steps, at which a run stops unfinished
MAX_RUN_STEPS = 10_000_000


def _steps_within(t1: float, dt: float, method: str = "rk4") -> bool:
    return STEPPERS[method].adaptive or t1 / dt <= MAX_RUN_STEPS


_STEPS_MESSAGE = (f"t1 / dt is the number of steps of every run: it must be at most {MAX_RUN_STEPS:,} (the steps a "
                  "run may take; past them it stops unfinished, after hours of work). Raise dt or lower t1")
#: a fixed-step run of t1 / dt steps stays within MAX_RUN_STEPS (an adaptive method's dt is only its first step)
STEPS_WITHIN = Relation(("t1", "dt"), _steps_within, _STEPS_MESSAGE, breaks={"t1": 1e7, "dt": 0.1})
STEPS_WITHIN_METHOD = Relation(("t1", "dt", "method"), _steps_within, _STEPS_MESSAGE,
                               breaks={"t1": 1e7, "dt": 0.1, "method": "rk4"})
SEEDS_PER_N = Relation(("n_seeds", "n_values"), lambda s, nv: isinstance(s, int) or len(s) == len(nv),
                       "must be one integer, or have one entry per n_values entry",
                       breaks={"n_seeds": [1, 2, 3], "n_values": [4, 8]})

#: a sweep's grid: each swept parameter of metrics.SWEEP_PARAMS with the rule of its values
GRID = MappingOf({"n_particles": Integer(1), "beta": Interval(0), "n_heads": Integer(1), "kind": Options(*KINDS),
                  "d": Integer(2),
                  "lambdas": SequenceOf(Interval(), hint="Each value is a list of head strengths, e.g. [1.0, 0.5].")})
#: a sweep's fixed parameters: one value of each (names and rules as in GRID)
FIXED = Instance(dict, test=lambda f: not f or GRID.accepts({k: [v] for k, v in f.items()}),
                 what=f"a dict of parameter name -> one value (names among {sorted(GRID.items)}, values as in grid), "
                      "e.g. {'beta': 2.0, 'lambdas': [1.0, 0.5]}")
HEADS_ONCE = Relation(("grid", "fixed"), lambda g, f: not {"lambdas", "n_heads"} <= set(g) | set(f or {}),
                      "gives n_heads and lambdas; the number of heads is the number of head strengths: give lambdas "
                      "only", breaks={"grid": {"n_heads": [1, 2]}, "fixed": {"lambdas": [1.0]}})
FIXED_OR_SWEPT = Relation(("grid", "fixed"), lambda g, f: not set(g) & set(f or {}),
                          "sweeps a parameter that fixed also sets: give each parameter once, in grid or in fixed",
                          breaks={"grid": {"beta": [1.0, 2.0]}, "fixed": {"beta": 2.0}})

MEAN_FIELD_MODEL = mean_field_model()
#: what every study and sweep takes for its cells' store and engine
RUN_OPTIONS = {"store": STORE, "engine": ENGINE, "max_workers": MAX_WORKERS, "progress": PROGRESS}
#: their defaults (no store, this process, the bar once the work has run 2 s)
RUN_DEFAULTS = {"store": None, "engine": "serial", "max_workers": None, "progress": None}
