"""No call that silently means something else: a public callable takes at most one numeric parameter
by position (the rest by keyword, where a swap is an error or shows), unless listed below with the
reason a swap cannot pass unnoticed. Calls in the positional order of earlier releases still work,
with a DeprecationWarning that writes the call with keywords."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import headflow
import meanfield
import metrics
import particles
from particles import theory as th
from particles.validation import Array, Integer, Interval, InvalidParameterError, declaration, keyword_only

#: callables allowed two or more positional numeric parameters, each with its reason
ALLOWED = {
    # records: the library builds them and the user reads their fields
    "particles.Trajectory": "a record a run returns (its fields are read, not passed)",
    "particles.HessianSpectrum": "a record particles.hessian_spectrum returns",
    "particles.RDThreshold": "a record particles.rd_threshold returns",
    "particles.extend.HeadSums": "the same record, which a kind's own pass returns",
    "particles.summation.Route": "a record of how a head factors, made by the summation layer",
    "particles.summation.FastPlan": "built by exp_sums from a model's checked fields",
    "particles.extend.ButcherTableau": "a constant table (DORMAND_PRINCE), not a call a user writes",
    "meanfield.SpectralSolution": "a record the spectral scheme returns",
    "metrics.RateFit": "a record metrics.fit_rate returns",
    "metrics.Plateau": "a record metrics.plateaus returns",
    "metrics.StaircaseStep": "a record metrics.energy_staircase returns",
    "particles.events.EventRecord": "a record simulate(events=...) returns in Trajectory.events",
    # a swap breaks a declared rule, so it is refused
    "particles.equiangular_tokens": "n an integer >= 1, rho in [-1/(n-1), 1], d >= n: a swap breaks a rule",
    "particles.theory.solve_equiangular": "rho0 a number, ts an increasing array of >= 2 times",
    "particles.theory.hitting_time": "rho0 < rho1 is declared: the swapped span is refused",
    "meanfield.sphere_harmonic_transform": "nlat > L is declared: the swapped call is refused",
    "particles.extend.rows_per_block": "a swap of m and n changes the block size only, never a result",
    "particles.extend.row_blocks": "a swap of m and n changes the blocks only, never a result",
    "metrics.AttnAccessor.wasserstein_between": "W_p is symmetric: a swap of t_a and t_b gives the same value",
    "particles.MultiHead.from_qk": "Q, K, W is the order every attention code writes (query, key, value)",
    # one numeric in reach; the others follow options
    "particles.MultiHead": "beta is the one number among the first four fields (block_elements and tol come "
                           "after four options, and change cost or accuracy bounds, not the model)",
    "particles.Ensemble": "beta is the one number among the first four fields (chunk comes after two options "
                          "and changes memory, not results)",
    "particles.extend.Stepper": "order is the one number a stepper needs; strong_order and error_order are "
                                "its optional facts",
    "particles.extend.PIDController": "error_order is the one number a controller needs (diffrax's order); the "
                                      "coefficients are optional tuning",
}


def _modules():
    names = []
    for pkg in (particles, meanfield, metrics, headflow):
        names.append(pkg.__name__)
        names += [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    return names


def _numeric(fn, p) -> bool:
    decl = declaration(fn)
    rule = decl.constraints.get(p.name) if decl else None
    if rule is not None:
        return isinstance(rule, (Interval, Array))
    if any(t in str(p.annotation) for t in ("int", "float")):
        return True
    return isinstance(p.default, (int, float)) and not isinstance(p.default, bool)


def _positional_numbers(obj) -> list[str]:
    fn = obj.__init__ if isinstance(obj, type) else obj
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "cls")
            and _numeric(fn, p)]


def _public_callables():
    seen, out = set(), {}
    for mod_name in _modules():
        mod = importlib.import_module(mod_name)
        for name in getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")]):
            obj = getattr(mod, name, None)
            if not callable(obj) or id(obj) in seen:
                continue
            if getattr(obj, "__module__", "").split(".")[0] not in ("particles", "meanfield", "metrics", "headflow"):
                continue
            seen.add(id(obj))
            out[f"{mod_name}.{name}"] = obj
            if isinstance(obj, type):
                for attr in vars(obj):
                    member = getattr(obj, attr)
                    if not attr.startswith("_") and callable(member) and id(member) not in seen:
                        seen.add(id(member))
                        out[f"{mod_name}.{name}.{attr}"] = member
    return out


def test_no_two_positional_numbers():
    found = {q: _positional_numbers(obj) for q, obj in _public_callables().items()}
    offenders = {q: names for q, names in found.items() if len(names) >= 2 and q not in ALLOWED}
    assert not offenders, f"take all but the first number by keyword (particles.validation.keyword_only): {offenders}"
    stale = sorted(q for q in ALLOWED if len(found.get(q, [])) < 2)
    assert not stale, f"listed in ALLOWED but no longer taking two positional numbers: {stale}"


def test_the_scan_sees_numbers():
    """The scan is not vacuous: it counts declared, annotated and defaulted numbers."""
    def f(a: int, b, c=2.0):
        pass
    assert _positional_numbers(f) == ["a", "c"]
    assert len(_public_callables()) > 150


# ---------------------------------------------------------------- the swaps of issue 58


def test_theory_swaps_warn_and_show_the_keywords():
    assert th.beta_star(3, alpha=0.7, n=16) == pytest.approx(0.8097, abs=1e-4)
    with pytest.warns(DeprecationWarning, match=r"beta_star\(16, n=3, alpha=0.7\)"):
        th.beta_star(16, 3, 0.7)
    assert float(th.rho_beta0(0.5, Lambda=2, n=8)) == pytest.approx(0.444, abs=1e-3)
    with pytest.warns(DeprecationWarning, match=r"rho_beta0\(0.5, Lambda=8, n=2\)"):
        th.rho_beta0(0.5, 8, 2)
    with pytest.warns(DeprecationWarning, match=r"n=4, beta=1.0, lam=2.0"):
        old = th.entropy_equiangular(0.2, 4, 1.0, 2.0)
    assert old == pytest.approx(th.entropy_equiangular(0.2, lam=2.0, beta=1.0, n=4), rel=1e-15)


def test_theory_has_one_order():
    """Keyword-only parameters in one order: strengths, beta, n, options."""
    order = ["lambdas", "Lambda", "lam", "alpha", "beta", "n", "kind", "rtol", "atol"]
    for name in th.__all__:
        fn = getattr(th, name)
        if not callable(fn) or isinstance(fn, (tuple, type)):
            continue
        kw = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]
        assert kw == sorted(kw, key=order.index), (name, kw)


def test_sampler_refuses_a_positional_d():
    flat = lambda x: np.ones(len(x))  # noqa: E731
    with pytest.raises(InvalidParameterError, match=r"by keyword only.*d=500"):
        metrics.sample_sphere_density(flat, 3, 500, np.random.default_rng(0))
    x = metrics.sample_sphere_density(flat, 3, d=500, rng=0)  # n < d is legitimate
    assert x.shape == (3, 500)
    with pytest.warns(DeprecationWarning, match=r"sample_uniform\(3, d=500, rng=0\)"):
        particles.sample_uniform(3, 500, 0)


def test_keyword_only_refuses_what_it_cannot_map():
    @keyword_only("b")
    def f(a, *, b):
        return a, b

    assert f(1, b=2) == (1, 2)
    with pytest.raises(InvalidParameterError, match="both by position and by keyword"):
        f(1, 2, b=3)
    with pytest.raises(InvalidParameterError, match="positional argument"):
        f(1, 2, 3)
    with pytest.raises(TypeError, match="keyword-only"):
        keyword_only("a")(lambda a: a)
    assert declaration(th.beta_star).constraints["n"] == declaration(th.beta_star.__wrapped__).constraints["n"]
    assert isinstance(declaration(th.beta_star).constraints["n"], Integer)
