"""From a checked config's sections to the library's objects: the ``[model]`` section's
:class:`particles.MultiHead` (``simulate``, ``study``), a sweep's ``model_fn`` and fixed parameters,
and the ``[density]`` table's density function. Errors are :class:`ConfigError` s naming the key."""

from __future__ import annotations

from ._config import MODEL_FIELDS, ConfigError

__all__ = ["build_model", "build_sweep_model", "build_density", "check_run"]


def build_model(section: dict, *, study: bool = False):
    """The [model] section's MultiHead; ``study``: refuse the options whose flow the mean-field reference
    does not solve (:data:`metrics._runs.params.STANDARD_FLOW`), naming the key."""
    import json

    import numpy as np

    import particles

    if study:
        from metrics.extend import STANDARD_FLOW

        for key, standard in STANDARD_FLOW.items():
            if section[key] != standard:
                raise ConfigError(
                    f"[model] {key} = {json.dumps(section[key])}: the study measures the particles against the "
                    "mean-field reference, which solves the standard flow on the sphere (causal = false, geometry = "
                    f'"sphere", update = "standard"), not this one. Remove [model] {key} (`headflow simulate` and '
                    "`headflow sweep` run this flow).")
    common = {name: section[name] for name in MODEL_FIELDS}
    if section["M"] is not None:
        W = None if section["W"] is None else np.asarray(section["W"], dtype=float)
        model = particles.MultiHead(np.asarray(section["M"], dtype=float), W, **common)
    else:
        model = particles.MultiHead.scalar(list(section["lambdas"]), d=int(section["d"]), **common)
    if model.d != int(section["d"]):
        raise ConfigError(f"[model] d = {section['d']} but M is {model.d} x {model.d}; make them agree.")
    return model


def build_sweep_model(section: dict, grid: dict):
    """(model_fn, fixed parameters) of a sweep from its [model] section (a key left out is None):
    beta, kind, d and lambdas fix what the grid does not sweep; M, W and the MultiHead options make
    a :class:`metrics.SweepModel`; nothing about the heads keeps :func:`metrics.default_model`."""
    import numpy as np

    import metrics

    given = {k: v for k, v in section.items() if v is not None}
    fixed = {k: given.pop(k) for k in ("beta", "kind", "d", "lambdas") if k in given}
    for key in fixed:
        if key in grid:
            raise ConfigError(f"[model] {key} = {fixed[key]!r} and [sweep] grid.{key} both give {key}: keep one "
                              "(the grid to sweep it, [model] to fix it).")
    if "n_heads" in grid and ("lambdas" in fixed or "lambdas" in grid or "M" in given):
        raise ConfigError("[sweep] grid.n_heads: the heads are given (lambdas or M), so their number is fixed; "
                          "sweep lambdas instead (e.g. grid.lambdas = [[1.0], [1.0, 0.5]]).")
    # ([model] M with [model] lambdas, and W without M, are refused by load_config for every command)
    M, W = (np.asarray(given.pop(k), dtype=float) if k in given else None for k in ("M", "W"))
    if M is not None:
        M = M[None] if M.ndim == 2 else M
        if "lambdas" in grid:
            raise ConfigError("[model] M and [sweep] grid.lambdas both give the heads; keep one.")
        if "d" in grid or fixed.get("d", M.shape[-1]) != M.shape[-1]:
            raise ConfigError(f"[model] M is {M.shape[-1]} x {M.shape[-1]}: it fixes d; remove d from the grid "
                              "and [model], or make them agree.")
        fixed.update(d=M.shape[-1], n_heads=len(M))
    if M is None and not given:
        return metrics.default_model, fixed
    return metrics.SweepModel(M=M, W=W, **given), fixed


def build_density(dens: dict, d: int):
    """The [density] table as a picklable density_fn(points) on S^{d-1}; errors name the key."""
    import metrics
    from particles.validation import InvalidParameterError

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
    except InvalidParameterError as exc:
        key = "expression" if family == "expression" else "family/parameters"
        raise ConfigError(f"[density] {key}: {exc}") from None
    return rho


def check_run(run: dict):
    """The [run] section's diagnostics (None: all; []: none, the positions alone), checked with its dt and kappa
    against its method; errors name the key."""
    import math

    import particles

    include, method = run["diagnostics"], run["method"]
    for name in include or ():
        if name not in particles.DIAGNOSTICS:
            raise ConfigError(f"[run] diagnostics: {name!r} is not one of {sorted(particles.DIAGNOSTICS)}.")
    if include == [] and not run["positions"]:
        raise ConfigError("[run] diagnostics = [] with [run] positions = false saves nothing: name the diagnostics "
                          "to save (or leave [run] diagnostics out for all of them), or set positions = true.")
    if float(run["dt"]) > float(run["t1"]) and not particles.STEPPERS[method].adaptive:
        raise ConfigError(f"[run] dt = {run['dt']:g} is longer than [run] t1 = {run['t1']:g}: method {method!r} takes "
                          f"fixed steps. Write dt <= {run['t1']:g} (e.g. dt = {run['t1'] / 100:g}) or a later t1.")
    if math.isfinite(float(run["kappa"])) and method != "euler_maruyama":
        raise ConfigError(f"[run] kappa = {float(run['kappa']):g} adds noise: use method = \"euler_maruyama\" (got "
                          f"{method!r}).")
    return include
