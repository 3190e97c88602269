r"""The grid of a phase diagram of any model: the model of each grid point, the coordinates its systems run in,
their batched field and the equiangular theory where it applies (:func:`metrics.phase_diagram`).

A grid is a dict of axis name to values; its points are the product of the axes. The model of a point is
``fn(point)`` for a function of the grid point (any axis names; ``point`` is the dict of its values), or the given
:class:`particles.MultiHead` with the point's values put in (:data:`MODEL_AXES`). The axis ``n`` (tokens per
system) is a run parameter of every diagram.

Coordinates: the heads commute with rotations when every head is scalar (:math:`M_h = m_h I`,
:math:`W_h = w_h I`) on the sphere with the standard update and no causal mask; then every velocity lies in the
span of the tokens, and n tokens in :math:`\mathbb R^d`, d > n, run in the n coordinates of that span
(:func:`metrics._observables.pairs.span_systems`). Any other model runs in all d coordinates. The systems of a
cell are one :class:`particles.Ensemble` (its batched passes; settling and merging where their certificates
hold) when the model has the standard update without a causal mask, else a stack of the model's own field, one
system after the other (:class:`StackedField`: causal masks and the normalisation variants, as
:class:`particles.MultiHead` runs them).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import xarray as xr

from particles import Ensemble, MultiHead, theory
from particles.extend import scalar_heads
from particles.validation import AnyOf, Function, Instance, Interval, InvalidParameterError, Model, SequenceOf

from .._data.dataset import KIND_ATTR, time_coord
from .._data.provenance import netcdf_safe, provenance
from .._observables.pairs import span_systems
from .._runs.assemble import summation_attrs
from .._runs.keys import model_key

__all__ = ["PHASE_STATISTICS", "MODEL_RULE", "GRID_RULE", "MODEL_AXES", "AXIS_NAMES", "is_values", "values_form",
           "grid_points", "point_model", "point_tokens", "check_point", "runs_in_span", "systems", "cell_field",
           "equiangular_time", "heads_key", "StackedField", "summarise"]

#: statistic name -> (long name, units)
PHASE_STATISTICS = {
    "clustered_pairs": ("fraction of token pairs with <x_i, x_j> >= rho_c", "1"),
    "n_clusters": ("number of eps-connected clusters", "1"),
}
#: the first positional: β values (one head M = W = I_d), a MultiHead, or a function of the grid point
MODEL_RULE = AnyOf(SequenceOf(Interval(0)), Model(), Function("a function of the grid point (a dict) -> MultiHead"),
               hint="Use e.g. np.linspace(0.1, 9, 90), or a MultiHead with grid={'beta': [...]}.")


def _axis_ok(name, values) -> bool:
    """A grid axis: a str name and distinct numbers or strings (one coordinate each)."""
    if not isinstance(name, str) or not isinstance(values, (list, tuple, np.ndarray)) or \
            getattr(values, "ndim", 1) != 1:
        return False
    items = list(values)
    return bool(items) and all(isinstance(v, (int, float, str, np.number)) and not isinstance(v, bool)
                               for v in items) and len(set(items)) == len(items)


GRID_RULE = Instance(dict, test=lambda g: bool(g) and all(_axis_ok(k, v) for k, v in g.items()),
                     what="a dict of axis name -> distinct numbers or strings, e.g. {'beta': [1.0, 2.0]}",
                     bad=({}, {"beta": []}, {"beta": [1.0, 1.0]}, {"beta": [[1.0], [2.0]]}, [("beta", [1.0])]))


def is_values(model) -> bool:
    """Whether the first positional is β values (the one-head M = W = I_d form)."""
    return not (isinstance(model, MultiHead) or callable(model))


#: the axes a MultiHead takes from a grid point (any other axis needs a function of the grid point)
MODEL_AXES = {
    "beta": "inverse temperature",
    "lambda_<h>": "strength of head h (scalar heads M_h = W_h = lambda_h I)",
    "spread": "spread s of the head strengths at fixed total: lambda_h = mean + s (lambda_h - mean) (scalar heads)",
    "d": "ambient dimension (scalar heads)",
}
#: long names of the grid axes the library knows
AXIS_NAMES = {"beta": "inverse temperature", "n": "tokens per system", "d": "ambient dimension",
              "H": "number of heads", "spread": MODEL_AXES["spread"]}


def values_form(settings):
    """The settings of the β-values form with its defaults: one head M = W = I_d, d = 2, softmax."""
    return replace(settings, d=settings.d or 2, kind=settings.kind or "softmax")


def grid_points(grid: dict) -> list[dict]:
    """The points of ``grid`` (the product of its axes, the last axis fastest)."""
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*grid.values())]


def _strengths(model: MultiHead, axis: str) -> np.ndarray:
    """The strengths of aligned scalar heads M_h = W_h = lambda_h I, or an error naming ``axis``."""
    heads = scalar_heads(model.M, model.W)
    if heads is None or not np.array_equal(heads[0], heads[1]):
        raise InvalidParameterError(
            f"The grid axis {axis!r} of phase_diagram sets head strengths, which needs scalar heads M_h = W_h = "
            f"lambda_h I (MultiHead.scalar); this model's heads are not: pass a function of the grid point that "
            f"builds each point's model, phase_diagram(lambda p: MultiHead(...), grid).")
    return np.asarray(heads[0], dtype=float)


def point_model(model, point: dict, caller: str = "phase_diagram") -> MultiHead:
    """The model of a grid point: ``model(point)`` for a function, else the MultiHead with the point's values of
    :data:`MODEL_AXES` put in (``n`` is the run's)."""
    if not isinstance(model, MultiHead):
        built = model(dict(point))
        if not isinstance(built, MultiHead):
            raise InvalidParameterError(f"The model function of {caller} must return a particles.MultiHead for "
                                        f"the grid point {point}; got {type(built).__name__}.")
        return built
    out, changes = model, {}
    for axis, value in point.items():
        if axis in ("beta", "n"):
            continue
        if axis == "spread":
            lam = _strengths(out, axis)
            lam = lam.mean() + float(value) * (lam - lam.mean())
        elif axis.startswith("lambda_") and axis[7:].isdigit() and int(axis[7:]) < model.n_heads:
            lam = _strengths(out, axis)
            lam[int(axis[7:])] = float(value)
        elif axis == "d":
            lam = None
        else:
            raise InvalidParameterError(
                f"The grid axis {axis!r} of phase_diagram is not one a MultiHead takes (beta, n, "
                f"lambda_0..lambda_{model.n_heads - 1}, spread, d): pass a function of the grid point, "
                f"phase_diagram(lambda p: MultiHead.scalar(..., beta=p['beta']), grid).")
        if lam is not None:
            M = lam[:, None, None] * np.eye(out.d)[None]
            out = out.replace(M=M, W=M.copy())
    if "d" in point:
        heads = scalar_heads(out.M, out.W)
        if heads is None:
            raise InvalidParameterError("The grid axis 'd' of phase_diagram needs scalar heads (M_h = m_h I, W_h = "
                                        "w_h I); pass a function of the grid point that builds each d's model.")
        eye = np.eye(int(point["d"]))[None]
        changes.update(M=np.asarray(heads[0])[:, None, None] * eye, W=np.asarray(heads[1])[:, None, None] * eye)
    if "beta" in point:
        changes["beta"] = float(point["beta"])
    return out.replace(**changes) if changes else out


def point_tokens(point: dict, n: int) -> int:
    """The tokens per system of a grid point: its ``n`` axis, else the run's ``n``."""
    return int(point.get("n", n))


def check_point(point: dict, model: MultiHead, n: int, init: str, merge: float) -> None:
    """What a grid point's model must allow: n orthonormal tokens for ``init="equiangular"`` (d >= n), and the
    batched field for ``merge`` (no causal mask, the standard update)."""
    if init == "equiangular" and model.d < n:
        raise InvalidParameterError(f"init='equiangular' of phase_diagram needs d >= n (n orthonormal tokens); the "
                                    f"grid point {point} has d = {model.d} < n = {n}.")
    if merge and not _batched(model):
        raise InvalidParameterError(f"The 'merge' parameter of phase_diagram merges tokens of the batched field, "
                                    f"which the model of the grid point {point} does not run (causal={model.causal}, "
                                    f"update={model.update!r}): pass merge=0.")


def runs_in_span(model: MultiHead) -> bool:
    """Whether the model's velocities lie in the span of the tokens: scalar heads on the sphere, the standard
    update, no causal mask (then the heads commute with every rotation)."""
    return (scalar_heads(model.M, model.W) is not None and model.geom.on_sphere and not model.causal
            and model.update == "standard")


def _batched(model: MultiHead) -> bool:
    """Whether :class:`particles.Ensemble` runs the model (the standard update without a causal mask)."""
    return not model.causal and model.update == "standard"


def systems(c: int, n: int, model: MultiHead, init: str, rng: np.random.Generator) -> np.ndarray:
    """c systems of n tokens: in the span's min(d, n) coordinates where the model commutes with rotations,
    else in all d (uniform tokens, or orthonormal ones for ``init="equiangular"``)."""
    d = model.d
    if runs_in_span(model):
        return span_systems(c, n, d, init, rng)
    if init == "equiangular":  # n orthonormal columns of R^d
        q, r = np.linalg.qr(rng.standard_normal((c, d, n)))
        return (q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]).transpose(0, 2, 1).copy()
    x = rng.standard_normal((c, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def cell_field(model: MultiHead, beta: float, c: int, r: int, chunk: int):
    """The field of c systems in r coordinates at inverse temperature ``beta``: an Ensemble of the heads
    (scalar heads written in r coordinates), or the model's own field on a stack."""
    if not _batched(model):
        return StackedField(model.replace(beta=float(beta), log_time_scale=0.0))  # physical time, as Ensemble
    heads = scalar_heads(model.M, model.W)
    M, W = (model.M, model.W) if heads is None or r == model.d else \
        (np.asarray(h, dtype=float)[:, None, None] * np.eye(r)[None] for h in heads)
    return Ensemble(M, W, beta=np.full(c, float(beta)), kind=model.kind, geometry=model.geometry, chunk=chunk)


class StackedField:
    """The field of a stack (S, n, d) of independent systems of one :class:`particles.MultiHead` (the models an
    Ensemble does not run: causal masks, normalisation variants), one system after the other."""

    reads_state_only = True

    def __init__(self, model: MultiHead):
        self.model = model
        self.geometry, self.geom = model.geometry, model.geom

    def check_x(self, x, name: str = "x") -> np.ndarray:
        for s in range(x.shape[0]):
            self.model.check_x(x[s], name)
        return x

    def __call__(self, t, x):
        return np.stack([self.model(t, xs) for xs in x])


def equiangular_time(model: MultiHead, n: int, rho_c: float) -> float:
    r"""The equiangular time from ρ = 0 to ``rho_c`` (docs/theory.md §4) of aligned scalar heads
    :math:`M_h = W_h = \lambda_h I` of a kind with an equiangular reduction, on the sphere with the standard
    update and no causal mask, where the flow reaches ``rho_c`` (:func:`particles.theory.hitting_time`: the sum
    over heads, each at its own :math:`\beta\lambda_h`); NaN for any other model."""
    heads = scalar_heads(model.M, model.W)
    if heads is None or not np.array_equal(heads[0], heads[1]) or not runs_in_span(model) or \
            model.kind not in theory.EQUIANGULAR_KINDS:
        return float("nan")
    try:
        return theory.hitting_time(0.0, rho_c, lambdas=np.asarray(heads[0], dtype=float), beta=float(model.beta), n=n,
                                   kind=model.kind)
    except InvalidParameterError:  # the rate vanishes somewhere on [0, rho_c] (ReLU at rho = 0, negative heads)
        return float("nan")


def heads_key(model: MultiHead) -> dict:
    """The key of a model's heads without its β (cells over β share it): scalar heads by their strengths (a
    d x d matrix per head would make the key O(H d^2)), any other by its matrices."""
    attrs = model_key(model.replace(beta=0.0))
    heads = scalar_heads(model.M, model.W)
    if heads is not None:
        attrs = {k: v for k, v in attrs.items() if not k.startswith(("M", "W"))}
        attrs.update(scalar_M=[float(m) for m in heads[0]], scalar_W=[float(w) for w in heads[1]], d=model.d)
    attrs.pop("beta", None)
    return json.loads(json.dumps(attrs, default=str))


def summarise(axes: dict, where: list, times: list, s, kind: str) -> xr.Dataset:
    """The Dataset over the grid ``axes``: ``where[k]`` is the sweep and β index of point k's cells."""
    shape = tuple(len(v) for v in axes.values())
    part = {name: np.stack([sw[name].values[i] for sw, i in where]) for name in where[0][0].data_vars}
    count = part["count"][..., 0]  # (points, K): the systems of each chunk
    total = count.sum(axis=1)[:, None]
    dims, data = tuple(axes), {}
    for name in s.statistic:
        s1, s2 = part[f"{name}_sum"].sum(axis=1), part[f"{name}_sumsq"].sum(axis=1)  # (points, T)
        mean = s1 / total
        var = np.maximum(s2 - total * mean**2, 0.0) / (total - 1)
        long_name, units = PHASE_STATISTICS[name]
        data[name] = (dims + ("time",), mean.reshape(shape + (-1,)),
                      {"long_name": f"mean over systems of the {long_name}", "units": units})
        data[f"{name}_se"] = (dims + ("time",), np.sqrt(var / total).reshape(shape + (-1,)),
                              {"long_name": f"standard error of {name} over systems", "units": units})
    if not np.all(np.isnan(times)):  # the equiangular time from rho = 0 to rho_c (NaN where no law applies)
        data["theory_time"] = (dims, np.reshape(times, shape), {"long_name": f"equiangular time from rho = 0 "
                                                                             f"to rho = {s.rho_c:g}", "units": "1"})
    data["success"] = (dims + ("chunk",), part["success"].reshape(shape + (-1,)).astype(np.int8),
                       {"long_name": "1 if the chunk's run reached t1", "units": "1"})
    sweep = where[0][0]
    coords = {k: (k, np.asarray(v), {"long_name": _long_name(k), "units": "1"})
              for k, v in axes.items()}
    coords["time"] = time_coord(sweep["time"].values, 0.0)  # Ensemble heads: the physical time
    coords["chunk"] = ("chunk", np.arange(sweep.sizes["seed"]),
                       {"long_name": "chunk of systems (SeedSequence spawn key)", "units": "1"})
    ds = xr.Dataset(data, coords=coords)
    config = s.config()
    values = is_values(s.model)
    ds.attrs = netcdf_safe({
        KIND_ATTR: kind,
        "title": f"headflow phase diagram ({s.kind}, n = {s.n}, d = {s.d})" if values else
        f"headflow phase diagram over {', '.join(axes)} (n = {s.n})",
        "history": "created by metrics.phase_diagram (cells by metrics.run_sweep)",
        **{k: v for k, v in config.items() if not isinstance(v, (list, tuple, dict)) and k != "model"
           and (values or v is not None)},
        **({} if values else {"grid_axes": ",".join(axes), "model_source": _source(s.model)}),
        "statistics": ",".join(s.statistic),
        "source": sweep.attrs["source"], "seed_entropy": sweep.attrs["seed_entropy"],
        # (point, chunk) runs that stopped, with the solver's reason
        "failed_cells": sweep.attrs["failed_cells"] if values else json.dumps(_failures(axes, where), default=str),
    })
    ds.attrs.update(summation_attrs(sw for sw, _ in where))  # how every chunk's sums were done
    ds.attrs.update(provenance(config=config, seeds={"entropy": sweep.attrs.get("seed_entropy", ""),
                                                     "spawn_key": "(chunk index,)"}))
    return ds


def _long_name(axis: str) -> str:
    """The long name of a grid axis: the library's own, a head's strength, or the axis' name."""
    if axis.startswith("lambda_") and axis[7:].isdigit():
        return f"strength lambda_{axis[7:]} of head {axis[7:]}"
    return AXIS_NAMES.get(axis, f"grid axis {axis}")


def _source(model) -> str:
    """What built the grid points' models, in words (the ``model_source`` attr)."""
    if isinstance(model, MultiHead):
        return "the MultiHead of config['model'] with each grid point's values put in"
    return f"{getattr(model, '__module__', '?')}.{getattr(model, '__qualname__', repr(model))} of each grid point"


def _failures(axes: dict, where: list) -> list:
    """The failed cells of every grid point, named by the point (its sweep names the point's β only)."""
    out = []
    for point, (sweep, i) in zip(grid_points(axes), where):
        beta = float(sweep["beta"].values[i])
        out += [{"point": point, "chunk": f.get("seed"), "message": f.get("message")}
                for f in json.loads(sweep.attrs["failed_cells"]) if float(f["params"]["beta"]) == beta]
    return out
