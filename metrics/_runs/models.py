r"""The models of a sweep's cells (:func:`metrics.run_sweep`): the heads :func:`metrics.default_model`
draws, :class:`SweepModel` (a ``model_fn`` with fixed :class:`particles.MultiHead` options, what the
``[model]`` section of ``headflow sweep`` builds) and the check that a cell's model is the one its
parameters describe."""

from __future__ import annotations

import json

import numpy as np

from particles import MultiHead
from particles.extend import MODEL_FIELDS, OPTION_FIELDS
from particles.validation import NONE, AnyOf, InvalidParameterError, check_instance, declare

from .._data.provenance import model_attrs

__all__ = ["SweepModel", "random_heads", "scalar_heads", "check_cell_model", "describe_model_fn", "cell_streams",
           "model_now"]

#: the MultiHead options a SweepModel fixes (beta and kind are each cell's parameters)
SWEEP_OPTIONS = {k: v for k, v in OPTION_FIELDS.items() if k not in ("beta", "kind")}


def random_heads(n_heads: int, d: int, rng: np.random.Generator) -> np.ndarray:
    r""":math:`M_h = Q_h\,\mathrm{diag}(u_h)\,Q_h^\top/H` with random rotations :math:`Q_h` and
    :math:`u_h \sim U(0.5, 1.5)^d` (symmetric, positive definite), shape (H, d, d)."""
    M = np.empty((n_heads, d, d))
    for h in range(n_heads):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        q = q * np.sign(np.diag(r))
        M[h] = (q * rng.uniform(0.5, 1.5, d)) @ q.T / n_heads
    return M


def scalar_heads(lambdas, d: int) -> np.ndarray:
    r"""Scalar heads :math:`M_h = \lambda_h I_d`, shape (H, d, d) (as :meth:`particles.MultiHead.scalar`)."""
    return np.asarray(lambdas, dtype=float)[:, None, None] * np.eye(d)[None]


@declare(M=AnyOf(NONE, MODEL_FIELDS["M"]), W=MODEL_FIELDS["W"], **SWEEP_OPTIONS)
class SweepModel:
    r"""A ``model_fn`` for :func:`metrics.run_sweep`: each cell's heads with fixed
    :class:`particles.MultiHead` options (``geometry``, ``log_time_scale``, ``summation``, ``tol``,
    ``block_elements``, ``causal``, ``update``).

    The heads of a cell are, in this order: its head strengths when the sweep has a ``lambdas``
    parameter (scalar heads :math:`M_h = W_h = \lambda_h I_d`); else ``M`` (and ``W``, default
    ``W = M``) when given; else random symmetric heads, as :func:`metrics.default_model`. ``beta``,
    ``kind`` and ``d`` are the cell's parameters. Picklable (a process pool takes it), and its
    ``repr`` names every option, so the cells' keys change with them.

    Examples
    --------
    >>> import numpy as np
    >>> fn = SweepModel(log_time_scale="auto")
    >>> params = {"lambdas": [1.0, 0.5], "n_heads": 2, "d": 3, "beta": 2.0, "kind": "usa"}
    >>> model = fn(params, np.random.default_rng(0))
    >>> model.n_heads, model.log_time_scale
    (2, 2.0)
    """

    def __init__(self, M=None, W=None, **options):
        self.M = None if M is None else (M[None] if M.ndim == 2 else M)
        self.W = None if W is None else (W[None] if W.ndim == 2 else W)
        if self.W is not None and (self.M is None or self.W.shape != self.M.shape):
            raise InvalidParameterError("The 'W' parameter of SweepModel must come with M, of its shape "
                                        f"{None if self.M is None else self.M.shape}; got shape {self.W.shape}.")
        unknown = sorted(set(options) - set(SWEEP_OPTIONS))
        if unknown:
            cell = [k for k in unknown if k in ("beta", "kind", "d", "n_heads", "lambdas")]
            raise InvalidParameterError(
                f"The {unknown[0]!r} parameter of SweepModel is not one of its options "
                + (f"({cell[0]!r} is each cell's parameter: sweep it in run_sweep's grid or set it in its fixed, "
                   f"e.g. fixed={{{cell[0]!r}: ...}})." if cell else
                   f"(the MultiHead options {sorted(SWEEP_OPTIONS)}); got {unknown}."))
        self.options = options

    def __call__(self, params: dict, rng: np.random.Generator) -> MultiHead:
        d, beta, kind = int(params["d"]), float(params["beta"]), str(params["kind"])
        if "lambdas" in params:
            M, W = scalar_heads(params["lambdas"], d), None
        elif self.M is not None:
            M, W = self.M, self.W
        else:
            M, W = random_heads(int(params["n_heads"]), d, rng), None
        return MultiHead(M, W, beta=beta, kind=kind, **self.options)

    def __repr__(self) -> str:
        mats = {k: getattr(self, k).tolist() for k in ("M", "W") if getattr(self, k) is not None}
        fields = {**mats, **{k: self.options[k] for k in sorted(self.options)}}
        return "SweepModel(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + ")"

    def source(self, params: dict) -> str:
        """What the heads of a cell with these parameters are (the sweep's ``model_source`` attr)."""
        if "lambdas" in params:
            return "scalar heads M_h = W_h = lambda_h I (the lambdas parameter)"
        return "the given M and W" if self.M is not None else "random symmetric heads (as metrics.default_model)"


def check_cell_model(model, params: dict) -> MultiHead:
    """The model of a cell must be the one its parameters describe: the dataset labels the cell
    (coordinates, or ``fixed_*`` attrs) by ``params``, not by what ``model_fn`` built."""
    check_instance(model, MultiHead, "model_fn(params, rng)", "run_sweep",
                   hint="model_fn must return a particles.MultiHead.")
    built = {"d": model.d, "n_heads": model.n_heads, "kind": model.kind, "beta": model.beta}
    if "lambdas" in params:  # scalar heads: M_h = W_h = lambda_h I exactly
        same = model.M.shape == (len(params["lambdas"]), model.d, model.d) and model.aligned and \
            np.array_equal(model.M, scalar_heads(params["lambdas"], model.d))
        built["lambdas"] = params["lambdas"] if same else "heads other than lambda_h I"
    for name, value in built.items():
        want = params[name]
        same = np.isclose(value, float(want), rtol=1e-12, atol=0) if name == "beta" else value == want
        if not same:
            raise InvalidParameterError(
                f"model_fn(params, rng) of run_sweep built a model with {name}={value!r} for a cell whose "
                f"params[{name!r}] is {want!r}; the dataset labels each cell by its params, so model_fn must "
                f"build the model they describe (read params[{name!r}]), or sweep {name!r} to the value it uses."
            )
    return model


def check_metrics_fit(model: MultiHead, names) -> MultiHead:
    """The metrics ``names`` of a sweep measure its cells' tokens: those on the unit sphere need a model on it."""
    from .._observables.registry import METRICS

    on_sphere = [name for name in names if METRICS[name].on_sphere]
    if on_sphere and not model.geom.on_sphere:
        raise InvalidParameterError(
            f"The 'metrics' parameter of run_sweep: {', '.join(on_sphere)} measure tokens on the unit sphere, but the "
            f"cells' heads run with geometry={model.geometry!r} (tokens off the sphere). Leave them out of metrics "
            "(the default list holds n_clusters: name the metrics yourself, e.g. metrics=['energy_multi', "
            "'mean_entropy']), or run the heads on the sphere.")
    return model


#: the modules the library's model functions were defined in when cell keys took their format (1): the
#: name enters every stored cell's file name, so it stays when the code moves (tests/metrics/test_store_keys.py)
KEY_MODULES = {"metrics._runs.sweep": "metrics.sweep", "metrics._runs.executors": "metrics._executors",
               "metrics._studies.phase": "metrics.phase", "metrics._runs.models": "metrics._sweep_models"}


def describe_model_fn(model_fn) -> str:
    """``module.qualname`` of a function; ``module.repr`` of a callable object (its options); the
    library's own modules under their key-format names (:data:`KEY_MODULES`)."""
    name = getattr(model_fn, "__qualname__", None) or repr(model_fn)
    module = getattr(model_fn, "__module__", "?")
    return f"{KEY_MODULES.get(module, module)}.{name}"


def cell_streams(settings: dict, seed_index: int) -> list:
    """The random streams of a cell: its tokens, its model and its noise."""
    ss = np.random.SeedSequence(settings["entropy"], spawn_key=(seed_index,))
    return [np.random.default_rng(s) for s in ss.spawn(3)]


def _same(a, b) -> bool:
    """Two models' attrs (as JSON reads them) agree: the same fields, numbers within 1e-9 (relative)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return bool(np.isclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True))
    return a == b


def model_now(cells, settings: dict, model_fn):
    """``current`` of :func:`metrics._runs.store.load_finished` for :func:`metrics.run_sweep`: a stored cell
    whose ``model`` attr is not the model ``model_fn`` builds for its parameters today (its body or its data
    changed) is stale."""
    def current(idx, ds) -> str:
        _, s, params = cells[idx]
        if "model" not in ds.attrs:
            return ""
        now = json.loads(json.dumps(model_attrs(model_fn(params, cell_streams(settings, s)[1]))))
        if _same(json.loads(ds.attrs["model"]), now):
            return ""
        return ("holds a model other than the one model_fn builds for its parameters today (model_fn or its data "
                "changed)")
    return current
