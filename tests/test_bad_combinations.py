"""Bad input that only shows in combination: arrays whose shapes must agree, and values valid
alone but not together; plus the large-β corner of every numeric diagnostic.

``COMBINATIONS`` lists, for each public callable taking several array arguments, calls in which
one pair of them disagrees; each must raise the library's own error naming one of the pair
(:data:`particles.validation.LIBRARY_ERRORS`), never return and never leak a numpy exception.
``test_every_multi_array_callable_has_combination_cases`` fails when a public callable of an
``__all__`` takes two or more array arguments and has no entry here.
"""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import meanfield as mf
import metrics
import particles
from particles import theory as th
from particles.validation import LIBRARY_ERRORS
from tests.helpers import garbled
from tests.test_bad_input import CASES

X = particles.sample_uniform(5, d=3, rng=0)
X4 = particles.sample_uniform(4, d=3, rng=1)
Y2 = particles.sample_uniform(5, d=2, rng=2)
EYE2 = np.stack([np.eye(3)] * 2)
EYE3 = np.stack([np.eye(3)] * 3)
U4, U5 = np.full(4, 0.25), np.full(5, 0.2)
C_PTS, C_AREAS = mf.circle_grid(16)
SM = particles.MultiHead(np.eye(3), beta=1.0, kind="softmax")
SC = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=1.0, kind="usa")
TRAJ = particles.simulate(X, SC, t1=0.2, dt=0.05, save=particles.SaveAt(ts=np.linspace(0.0, 0.2, 4)))

#: tags of test_bad_input.CASES that mark an array argument
ARRAY_TAGS = {"points", "weights", "weights_nn", "matrix", "matrix_nn", "array", "stack", "times"}

# name -> [(pair of arguments that disagree, callable, kwargs)]; the error must name one of the pair
COMBINATIONS = {
    "metrics.sentences.bert_embeddings": [
        (("ids", "type_ids"), __import__("metrics.sentences").sentences.bert_embeddings,
         dict(tensors={f"embeddings.{p}_embeddings.weight": np.ones((4, 3)) for p in ("word", "position",
                                                                                       "token_type")},
              ids=[1, 2, 3], type_ids=[0, 1])),
    ],
    "metrics.breakdown_time": [
        (("t", "values"), metrics.breakdown_time, dict(t=np.linspace(0, 1, 5), values=np.linspace(0, 1, 4), delta=0.5)),
    ],
    "metrics.fit_horizon_slope": [
        (("n_values", "t_delta"), metrics.fit_horizon_slope,
         dict(n_values=[10.0, 100.0, 1000.0], t_delta=np.ones((4, 2)))),
        (("counts", "t_delta"), metrics.fit_horizon_slope,
         dict(n_values=[10.0, 100.0], t_delta=np.ones((2, 2)), counts=[3, 1])),
        (("counts", "n_values"), metrics.fit_horizon_slope,
         dict(n_values=[10.0, 100.0], t_delta=np.ones((2, 2)), counts=[2, 1, 1])),
    ],
    "metrics.sliced_w2_to_uniform_s2": [
        (("directions", "x"), metrics.sliced_w2_to_uniform_s2, dict(x=np.eye(3), directions=np.eye(2))),
    ],
    "metrics.fit_rate": [
        (("gaps", "n_values"), metrics.fit_rate, dict(n_values=[10.0, 40.0, 160.0], gaps=np.ones((4, 2)))),
    ],
    "metrics.circle_wasserstein": [
        (("theta", "weights"), metrics.circle_wasserstein, dict(theta=[0.1, 1.0], atoms=[0.5, 2.0], weights=[1.0])),
        (("atom_weights", "atoms"), metrics.circle_wasserstein,
         dict(theta=[0.1, 1.0], atoms=[0.5, 2.0, 3.0], atom_weights=[0.5, 0.5])),
    ],
    "metrics.sliced_wasserstein_embedded": [
        (("x", "y"), metrics.sliced_wasserstein_embedded, dict(x=np.eye(3), y=np.eye(2))),
    ],
    "particles.MultiHead.sums": [
        (("sources", "x"), particles.MultiHead(np.eye(3), beta=1.0).sums, dict(x=np.eye(3), sources=np.eye(2))),
        (("sources", "x"), particles.MultiHead(np.eye(3), beta=1.0).sums, dict(x=np.eye(2), sources=np.eye(3))),
    ],
    "particles.MultiHead": [
        (("M", "W"), particles.MultiHead, dict(M=EYE2, W=EYE3)),
        (("M", "W"), particles.MultiHead, dict(M=np.eye(3), W=np.eye(2))),
    ],
    "metrics.SweepModel": [
        (("M", "W"), metrics.SweepModel, dict(M=EYE2, W=EYE3)),
        (("M", "W"), metrics.SweepModel, dict(M=np.stack([np.eye(3)] * 2), W=np.eye(3))),
    ],
    "particles.MultiHead.from_qk": [
        (("Q", "K"), particles.MultiHead.from_qk, dict(Q=EYE2, K=np.eye(3), W=np.eye(3))),
        (("Q", "K"), particles.MultiHead.from_qk, dict(Q=np.eye(3), K=np.eye(2), W=np.eye(3))),
        (("Q", "W"), particles.MultiHead.from_qk, dict(Q=EYE2, K=EYE2, W=EYE3)),
        (("K", "W"), particles.MultiHead.from_qk, dict(Q=np.eye(3), K=np.eye(3), W=np.eye(2))),
    ],
    "particles.Ensemble": [
        (("M", "W"), particles.Ensemble, dict(M=EYE2, W=EYE3, beta=[1.0])),
        (("M", "W"), particles.Ensemble, dict(M=EYE2, W=np.eye(3)[None], beta=[1.0])),
        (("M", "W"), particles.Ensemble, dict(M=np.eye(3), W=np.eye(2), beta=[1.0])),
    ],
    "particles.project_tangent": [(("x", "v"), particles.project_tangent, dict(x=X, v=X4))],
    "particles.retract": [(("x", "v"), particles.retract, dict(x=X, v=np.zeros((4, 3))))],
    "particles.exp_map": [(("x", "v"), particles.exp_map, dict(x=X, v=np.zeros((5, 2))))],
    "particles.geodesic_distance": [(("x", "y"), particles.geodesic_distance, dict(x=X, y=Y2)),
                                    (("x", "y"), particles.geodesic_distance, dict(x=X, y=X4))],
    "meanfield.EmpiricalMeasure": [(("points", "weights"), mf.EmpiricalMeasure, dict(points=X, weights=U4))],
    "meanfield.GridMeasure": [
        (("points", "areas"), mf.GridMeasure, dict(points=C_PTS, areas=C_AREAS[:8], mass=np.full(16, 1 / 16))),
        (("points", "mass"), mf.GridMeasure, dict(points=C_PTS, areas=C_AREAS, mass=np.full(8, 1 / 8))),
        (("areas", "mass"), mf.GridMeasure, dict(points=C_PTS, areas=C_AREAS[:8], mass=np.full(8, 1 / 8))),
    ],
    "meanfield.measure_velocity": [
        (("points", "weights"), mf.measure_velocity, dict(model=SM, points=X, weights=U4)),
        (("points", "at"), mf.measure_velocity, dict(model=SM, points=X, at=Y2)),
    ],
    "meanfield.measure_energy": [(("points", "weights"), mf.measure_energy, dict(model=SM, points=X, weights=U4))],
    "meanfield.first_variation": [(("points", "weights"), mf.first_variation, dict(model=SM, points=X, weights=U4))],
    "meanfield.uniform_growth_rate": [
        (("lam", "mu"), mf.uniform_growth_rate, dict(beta=1.0, lam=[1.0, 2.0], mu=[1.0])),
    ],
    "meanfield.critical_kappa": [(("lam", "mu"), mf.critical_kappa, dict(beta=1.0, lam=[1.0, 2.0], mu=[1.0]))],
    "metrics.wasserstein": [
        (("x", "y"), metrics.wasserstein, dict(x=X, y=Y2)),
        (("x", "a"), metrics.wasserstein, dict(x=X, y=X4, a=U4)),
        (("y", "b"), metrics.wasserstein, dict(x=X, y=X4, b=U5)),
    ],
    "metrics.sinkhorn_divergence": [(("x", "y"), metrics.sinkhorn_divergence, dict(x=X, y=Y2)),
                                    (("x", "a"), metrics.sinkhorn_divergence, dict(x=X, y=X4, a=U4))],
    "metrics.sliced_wasserstein_sphere": [(("x", "y"), metrics.sliced_wasserstein_sphere, dict(x=X, y=Y2)),
                                          (("x", "a"), metrics.sliced_wasserstein_sphere, dict(x=X, y=X4, a=U4))],
    "metrics.distance_to_uniform": [(("x", "weights"), metrics.distance_to_uniform, dict(x=X, weights=U4))],
    "metrics.geodesic_cost": [(("x", "y"), metrics.geodesic_cost, dict(x=X, y=Y2))],
    "metrics.n_clusters": [(("x", "weights"), metrics.n_clusters, dict(x=X, weights=U4))],
    "metrics.cluster_sizes": [(("x", "weights"), metrics.cluster_sizes, dict(x=X, weights=U4))],
    "metrics.silhouette": [(("x", "labels"), metrics.silhouette, dict(x=X, labels=[0, 0, 1, 1]))],
    "metrics.evaluate": [(("x", "weights"), metrics.evaluate, dict(names=["n_clusters"], x=X, weights=U4))],
    "particles.misaligned_model": [
        (("M", "Delta"), particles.misaligned_model, dict(M=np.eye(3), Delta=0.1 * np.eye(2), beta=1.0)),
        (("M", "Delta"), particles.misaligned_model, dict(M=EYE2, Delta=0.1 * EYE3, beta=1.0)),
    ],
    "particles.radial_dominance": [(("traj", "ts"), particles.radial_dominance,
                                    dict(model=SC, traj=TRAJ.x, ts=np.linspace(0.0, 1.0, 3)))],
    "metrics.plateaus": [(("t", "values"), metrics.plateaus, dict(t=np.linspace(0.1, 1.0, 6), values=np.ones(5)))],
    "metrics.cluster_energy": [(("centres", "masses"), metrics.cluster_energy,
                                dict(model=SC, centres=X[:2], masses=[0.2, 0.3, 0.5]))],
    "metrics.staircase": [(("traj", "ts"), metrics.staircase, dict(model=SC, traj=TRAJ.x, ts=np.linspace(0, 1, 3)))],
}

# name -> {pair: why no value of one constrains the other}
INDEPENDENT = {
    "metrics.breakdown_time": {("delta", "t"): "delta is a list of thresholds, any length",
                               ("delta", "values"): "delta is a list of thresholds, any length"},
    "metrics.predicted_breakdown_time": {("amplitude0", "delta"): "one prediction per threshold and amplitude"},
    "metrics.circle_wasserstein": {
        ("atoms", "theta"): "two measures on the circle: any numbers of atoms",
        ("atom_weights", "theta"): "the weights of the second measure; the first has its own",
        ("atoms", "weights"): "the weights of the first measure; the second has its own",
        ("atom_weights", "weights"): "one weight vector per measure, of its own length",
    },
    "particles.Ensemble": {("M", "beta"): "one beta per system, any number of systems and heads",
                           ("W", "beta"): "one beta per system, any number of systems and heads"},
    "theory.equiangular_rhs": {("lambdas", "rho"): "rho is any array of overlaps, lambdas one strength per head"},
    "theory.solve_equiangular": {("lambdas", "ts"): "save times and head strengths are unrelated"},
    "particles.rd_threshold": {("bracket", "x0"): "a beta interval and the initial tokens are unrelated"},
    "meanfield.measure_velocity": {("at", "weights"): "weights belong to points; 'at' are evaluation points"},
    "metrics.wasserstein": {("a", "b"): "weights of two measures of any sizes", ("a", "y"): "a weighs x, not y",
                            ("b", "x"): "b weighs y, not x"},
    "metrics.sinkhorn_divergence": {("a", "y"): "a weighs x, not y"},
    "metrics.sliced_wasserstein_sphere": {("a", "y"): "a weighs x, not y"},
}


def _array_args(tags):
    return sorted(arg for arg, tag in tags.items() if tag in ARRAY_TAGS)


def test_every_multi_array_callable_has_combination_cases():
    """A public callable taking two or more arrays lists a disagreeing call for every pair of them,
    or says why the pair is independent: a new one without either fails here."""
    missing = []
    for name, (_, _, tags) in CASES.items():
        for pair in itertools.combinations(_array_args(tags), 2):
            covered = {tuple(sorted(p)) for p, _, _ in COMBINATIONS.get(name, [])}
            if pair not in covered and pair not in INDEPENDENT.get(name, {}):
                missing.append((name, pair))
    assert missing == []
    # and no stale entry: every listed pair names real array arguments of a listed callable
    for table in (COMBINATIONS, INDEPENDENT):
        for name, entries in table.items():
            pairs = [p for p, _, _ in entries] if table is COMBINATIONS else list(entries)
            for pair in pairs:
                assert set(pair) <= set(_array_args(CASES[name][2])), (name, pair)


PAIR_CASES = [(name, pair, fn, kwargs) for name, entries in COMBINATIONS.items() for pair, fn, kwargs in entries]


@pytest.mark.parametrize("name, pair, fn, kwargs", PAIR_CASES,
                         ids=[f"{n}-{'/'.join(p)}-{i}" for i, (n, p, _, _) in enumerate(PAIR_CASES)])
def test_disagreeing_pair_raises_library_error(name, pair, fn, kwargs):
    _raises_naming(fn, kwargs, pair)


# ------------------------------------------------------------------ combinations through callables and configs
def _td(weights_fn):
    return lambda: particles.simulate(X, particles.TimeDependent(weights_fn, SM), t1=0.1, dt=0.05)


def _sweep(**kw):
    return lambda: metrics.run_sweep(**dict(dict(grid={"beta": [1.0]}, t1=0.1, dt=0.05, n_saves=2), **kw))


def _fixed_model(params, rng):
    return particles.MultiHead(np.eye(3), beta=1.0, kind="softmax")


OTHER = {
    # weights_fn's matrices against the template (heads of M vs W, d vs the tokens, d changing in time)
    "TimeDependent-M/W-heads": (_td(lambda t: (EYE2, np.eye(3)[None])), ["W"]),
    "TimeDependent-d-vs-template": (_td(lambda t: (np.eye(2), np.eye(2))), ["weights_fn", "template"]),
    "TimeDependent-d-changes": (_td(lambda t: (np.eye(3),) * 2 if t < 0.05 else (np.eye(2),) * 2), ["weights_fn"]),
    "SaveAt-ts-and-every": (lambda: particles.SaveAt(ts=[0.0, 0.1], every=2), ["ts", "every"]),
    "SaveAt-x-False-without-fn": (lambda: particles.SaveAt(x=False), ["fn"]),
    "SaveAt-fn-keys-change": (lambda: particles.simulate(X, SM, t1=0.2, dt=0.05, save=particles.SaveAt(
        every=1, fn=lambda t, x: {"a": 1.0} if t < 0.1 else {"b": 1.0})), ["fn"]),
    "SaveAt-fn-shapes-change": (lambda: particles.simulate(X, SM, t1=0.2, dt=0.05, save=particles.SaveAt(
        every=1, fn=lambda t, x: {"a": np.ones(1 + int(t > 0.1))})), ["fn"]),
    "SaveAt-ts-outside-run": (lambda: particles.simulate(X, SM, t1=0.2, dt=0.05, save=particles.SaveAt(ts=[0.0, 0.5])),
                              ["ts"]),
    "Trajectory-t/x": (lambda: particles.Trajectory(t=np.zeros(2), x=np.zeros((3, 5, 3)), saved={}), ["x"]),
    "Trajectory-t/saved": (lambda: particles.Trajectory(t=np.zeros(2), x=None, saved={"a": np.zeros(3)}), ["saved"]),
    "simulate_layers-d": (lambda: particles.simulate_layers(X, [SM, particles.MultiHead(np.eye(2))], dt=0.5),
                          ["layers"]),
    "trajectory_to_dataset-model-d": (lambda: metrics.trajectory_to_dataset(
        TRAJ, model=particles.MultiHead(np.eye(2), kind="softmax")), ["model"]),
    "Ensemble.velocity-S": (lambda: particles.Ensemble(np.eye(3), beta=[1.0, 2.0]).velocity(X[None]), ["x"]),
    # sweep grids against model_fn: the dataset labels cells by params, the model must be theirs
    "run_sweep-grid-beta-vs-model_fn": (_sweep(grid={"beta": [1.0, 2.0]}, model_fn=_fixed_model), ["model_fn"]),
    "run_sweep-grid-n_heads-vs-model_fn": (_sweep(grid={"n_heads": [1, 2]}, model_fn=_fixed_model), ["model_fn"]),
    "run_sweep-grid-d-vs-model_fn": (_sweep(grid={"d": [2]}, model_fn=_fixed_model), ["model_fn"]),
    "run_sweep-default-kind-vs-model_fn": (_sweep(grid={"n_particles": [8]}, model_fn=lambda p, r: particles.MultiHead(
        np.eye(3), kind="usa")), ["model_fn"]),
    # study: the density against the sphere of the model, the reference against the runs
    "study-density-shape-vs-d": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=3, kind="usa"), lambda y: np.ones((len(y), 2)), n_values=(16, 32)),
        ["density_fn"]),
    "study-n_reference-below-n_values": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=3, kind="usa"), lambda y: 1 + 0 * y[:, 0], n_values=(16, 64),
        n_reference=32, reference="lagrangian"), ["n_reference"]),
    # reference="auto" falls back to a Lagrangian reference for non-zonal data in d = 4: checked there
    "study-n_reference-below-n_values-auto-fallback": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=4, kind="usa"), lambda y: 1 + 0.5 * y[:, 0] * y[:, 1],
        n_values=(16, 64), n_reference=32), ["n_reference"]),
    "study-n_seeds-vs-n_values": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=2, kind="softmax"), lambda y: 1 + 0.5 * y[:, 0], n_values=(16, 32),
        n_seeds=(4, 2, 2)), ["n_seeds"]),
    "study-n_seeds-per-n-vs-nested": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=2, kind="softmax"), lambda y: 1 + 0.5 * y[:, 0], n_values=(16, 32),
        n_seeds=(4, 2), sampling="nested"), ["n_seeds"]),
    "fit_rate-counts-vs-gaps": (lambda: metrics.fit_rate([10, 20], np.ones((2, 3)), counts=[4, 2]), ["counts"]),
    "study-dt-above-t1": (lambda: metrics.mean_field_limit_study(
        particles.MultiHead.scalar([1.0], d=2, kind="softmax"), lambda y: 1 + 0.5 * y[:, 0], n_values=(16, 32),
        t1=0.1, dt=0.5), ["dt"]),
    # an overlap rho of n equiangular unit vectors lies in [-1/(n-1), 1]
    "equiangular_rhs-rho-vs-n": (lambda: th.equiangular_rhs(np.array([0.1, -0.5]), lambdas=[1.0], beta=1.0, n=4),
                                 ["rho"]),
    "entropy_equiangular-rho-vs-n": (lambda: th.entropy_equiangular(1.5, n=4, beta=1.0, lam=1.0), ["rho"]),
    "cos_angle_equiangular-rho-vs-n": (lambda: th.cos_angle_equiangular(-0.5, beta=1.0, n=4), ["rho"]),
    "wasserstein_ascent-mu0-vs-model-d": (lambda: mf.wasserstein_ascent(
        mf.GridMeasure(C_PTS, C_AREAS, np.full(16, 1 / 16)), SM, t1=0.05, scheme="fv_circle"), ["model", "mu0"]),
    "harmonic_growth-harmonic_fn-shape": (lambda: mf.harmonic_growth(SC, lambda p: p[:, :2], m=40, t1=0.02,
                                                                     n_saves=3), ["harmonic_fn"]),
    "rd_threshold-make_model-vs-x0": (lambda: particles.rd_threshold(
        lambda b: particles.MultiHead.scalar([1.0, 0.5], d=2, beta=b), X, t1=0.1, bracket=(0.0, 1.0), n_grid=2,
        xtol=0.3, n_saves=3), ["x0", "make_model", "x"]),
}


@pytest.mark.parametrize("case", sorted(OTHER))
def test_disagreeing_configuration_raises_library_error(case):
    call, names = OTHER[case]
    _raises_naming(lambda: call(), {}, names)


def _raises_naming(fn, kwargs, names):
    """fn(**kwargs) must raise a library error whose message names one of ``names``."""
    try:
        out = fn(**kwargs)
    except LIBRARY_ERRORS as exc:
        msg = str(exc)
        assert any(n in msg for n in names), f"the message does not name {names}: {msg}"
        assert not any(garbled(msg, n) for n in names), f"{[garbled(msg, n) for n in names]}: {msg}"
        return
    except Exception as exc:  # noqa: BLE001 - the point of the suite
        pytest.fail(f"obscure failure: {type(exc).__name__}: {exc}")
    pytest.fail(f"silent: returned {type(out).__name__} instead of raising")


# ------------------------------------------------------------------ Ensemble (defect: extra W heads ignored,
# missing ones an IndexError inside the loop)
@pytest.mark.parametrize("M, W", [(EYE2, EYE3), (EYE2, np.eye(3)[None]), (np.eye(3), EYE2)],
                         ids=["W-has-more-heads", "W-has-fewer-heads", "M-one-head-W-two"])
def test_ensemble_heads_of_M_and_W_must_agree(M, W):
    _raises_naming(particles.Ensemble, dict(M=M, W=W, beta=[1.0]), ["W"])


def test_ensemble_with_matching_heads_equals_the_multihead_per_system():
    # the check above must not refuse the valid case: S systems = S MultiHead fields
    rng = np.random.default_rng(0)
    M = rng.standard_normal((2, 3, 3))
    W = rng.standard_normal((2, 3, 3))
    x = np.stack([particles.sample_uniform(6, d=3, rng=s) for s in range(2)])
    ens = particles.Ensemble(M, W=W, beta=[0.5, 2.0])
    for s, b in enumerate([0.5, 2.0]):
        ref = particles.MultiHead(M, W, beta=b, kind="softmax").velocity(x[s])
        np.testing.assert_allclose(ens.velocity(x)[s], ref, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ large-β diagnostics
KINDS = ["softmax", "usa", "relu", "relu_rownorm"]
BETAS = [1e-8, 1.0, 1e3, 1e4]
# the only diagnostics documented as possibly infinite (particles.diagnostics docstring)
MAY_OVERFLOW = {"energy", "energy_multi", "energy_rate", "head_energy_rate", "rate_residual"}


def _model(kind, beta, symmetric):
    M = particles.MultiHead.scalar([1.0, 0.5], d=3).M
    if not symmetric:
        M = M + 0.3 * np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    # USA heads overflow float64 past beta |M| ~ 700 unless time is rescaled (documented)
    return particles.MultiHead(M, beta=beta, kind=kind, log_time_scale="auto" if kind == "usa" else 0.0)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("kind", KINDS)
def test_diagnostics_finite_or_documented_infinite(kind, beta, symmetric):
    model = _model(kind, beta, symmetric)
    x = particles.sample_uniform(20, d=3, rng=1)
    out = particles.diagnose(model, x)
    for name, value in out.items():
        value = np.asarray(value, dtype=float)
        assert not np.any(np.isnan(value)), f"{name} has NaN at beta={beta} ({kind})"
        if name not in MAY_OVERFLOW:
            assert np.all(np.isfinite(value)), f"{name} is infinite at beta={beta} ({kind})"
    assert np.all(np.isfinite(out["log_energy"]))
    # an infinite energy or rate is one whose logarithm is past the float64 range
    big = out["log_energy"] > np.log(np.finfo(float).max)
    assert np.array_equal(np.isinf(out["energy"]), big)
    if np.isfinite(out["energy_rate"]):
        assert out["rate_residual"] == pytest.approx(out["energy_rate"] - out["kinetic"], rel=1e-15, abs=0)


@pytest.mark.parametrize("beta", [1e3, 1e4])
@pytest.mark.parametrize("kind", ["softmax", "relu"])
def test_infinite_rate_has_the_sign_of_the_log_energy_change(kind, beta):
    """dE_h/dt = E_h d(log E_h)/dt: past the float64 range the rate is ±inf with the sign of the
    (finite) change of log E_h along the flow, measured by a small step of the retraction."""
    model = _model(kind, beta, symmetric=True)
    # a cluster of angular width ~ 1/sqrt(beta): the off-diagonal weights, and so the rate, are O(1)
    # relative to the diagonal (on random tokens log E_h barely moves above its round-off)
    rng = np.random.default_rng(1)
    x = particles.normalize(np.array([0.0, 0.0, 1.0]) + rng.standard_normal((20, 3)) / np.sqrt(beta))
    out = particles.diagnose(model, x)
    rate = out["head_energy_rate"]
    assert np.any(np.isinf(rate))  # head 0 (beta |M| = beta) is past the range
    v = model.velocity(x)
    tau = 1e-6 / float(np.max(np.abs(v)))
    dlog = (model.log_head_energies(particles.retract(x, tau * v)) - model.log_head_energies(x)) / tau
    for h in range(model.n_heads):
        assert abs(dlog[h]) * tau > 1e-9  # the step moved log E_h well above its round-off
        assert np.sign(rate[h]) == np.sign(dlog[h])
        if np.isfinite(rate[h]):  # a finite rate of an overflowing-scale head: its size too
            assert rate[h] / out["energy"][h] == pytest.approx(dlog[h], rel=1e-3)


@pytest.mark.parametrize("beta", [1e-8, 1.0, 3.0, 1e3])
def test_usa_gradient_flow_rate_equals_kinetic_at_every_beta(beta):
    """Theorem 11 (USA, C3 + C4): dE_multi/dt = (1/n) Σ|ẋ_i|², in the rescaled units of
    log_time_scale; the log-domain sum keeps it to round-off where E itself overflows."""
    model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=beta, kind="usa", log_time_scale="auto")
    out = particles.diagnose(model, particles.sample_uniform(20, d=3, rng=1))
    assert out["energy_rate"] == pytest.approx(out["kinetic"], rel=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_log_domain_rates_equal_the_gradient_rates_where_finite(kind):
    # at moderate beta the stable sum is the plain one: Σ_i <∇_i E_h, ẋ_i>
    model = _model(kind, 2.0, symmetric=False)
    x = particles.sample_uniform(15, d=3, rng=2)
    out = particles.diagnose(model, x)
    xdot = model.velocity(x)
    grads = model._head_gradients(x, model._exp_sums(x))
    np.testing.assert_allclose(out["head_energy_rate"], np.einsum("hid,id->h", grads, xdot), rtol=1e-10, atol=1e-14)


# every numeric function of a state, at every kind and beta: finite, documented +-inf, or a library
# error (a kind a function does not support, a USA head past float64 without log_time_scale); never
# NaN, never a numpy warning (pytest turns warnings into errors) or exception
XS = particles.sample_uniform(12, d=3, rng=0)
NUMERIC = {
    "MultiHead.velocity": lambda m: m.velocity(XS),
    "MultiHead.weights": lambda m: m.weights(XS),
    "MultiHead.energy": lambda m: m.energy(XS),
    "MultiHead.head_energies": lambda m: m.head_energies(XS),
    "MultiHead.log_head_energies": lambda m: m.log_head_energies(XS),
    "MultiHead.energy_gradient": lambda m: m.energy_gradient(XS),
    "MultiHead.entropy": lambda m: m.entropy(XS),
    "MultiHead.head_outputs": lambda m: m.head_outputs(XS),
    "metrics.energy": lambda m: metrics.energy(XS, model=m),
    "metrics.head_energies": lambda m: metrics.head_energies(XS, model=m),
    "metrics.log_head_energies": lambda m: metrics.log_head_energies(XS, model=m),
    "metrics.mean_entropy": lambda m: metrics.mean_entropy(XS, model=m),
    "metrics.leaders": lambda m: metrics.leaders(XS, model=m),
    "metrics.cluster_energy": lambda m: metrics.cluster_energy(m, XS[:2], [0.5, 0.5]),
    "particles.misalignment_rates": lambda m: particles.misalignment_rates(m, XS),
    "particles.head_rate_bounds": lambda m: particles.head_rate_bounds(m, XS),
    "particles.rd_margins": lambda m: particles.rd_margins(m, XS),
    "particles.delta_v": lambda m: particles.delta_v(m, XS),
    "particles.riemannian_hessian": lambda m: particles.riemannian_hessian(m, XS),
    "particles.euclidean_hessian": lambda m: particles.euclidean_hessian(m, XS),
    "particles.hessian_spectrum": lambda m: particles.hessian_spectrum(m, XS),
    "particles.field_jacobian": lambda m: particles.field_jacobian(m, XS),
    "meanfield.measure_energy": lambda m: mf.measure_energy(m, XS),
    "meanfield.measure_velocity": lambda m: mf.measure_velocity(m, XS),
    "meanfield.first_variation": lambda m: mf.first_variation(m, XS),
}
# documented: +-inf exactly when the energy scale e^{beta |M|} is past float64 (the log forms stay finite)
MAY_BE_INFINITE = {"MultiHead.energy", "MultiHead.head_energies", "MultiHead.energy_gradient", "metrics.energy",
                   "metrics.head_energies", "metrics.cluster_energy", "meanfield.measure_energy",
                   "meanfield.first_variation"}


def _numbers(value):
    if isinstance(value, dict):
        return np.concatenate([_numbers(v) for v in value.values()] or [np.zeros(0)])
    if isinstance(value, tuple):
        return np.concatenate([_numbers(v) for v in value] or [np.zeros(0)])
    if hasattr(value, "__dataclass_fields__"):
        parts = [getattr(value, f) for f in value.__dataclass_fields__]
        return np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts
                               if isinstance(p, (float, int, np.ndarray)) and not isinstance(p, bool)] or [np.zeros(0)])
    return np.ravel(np.asarray(value, dtype=float))


# log_time_scale='auto' rescales USA heads only (it is the identity for the other kinds)
KIND_SCALES = [(kind, 0.0) for kind in KINDS] + [("usa", "auto")]


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("kind, scale", KIND_SCALES, ids=[f"{k}-{s}" for k, s in KIND_SCALES])
@pytest.mark.parametrize("name", sorted(NUMERIC))
def test_numeric_functions_finite_or_documented_at_every_beta(name, kind, scale, beta):
    model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=beta, kind=kind, log_time_scale=scale)
    try:
        value = NUMERIC[name](model)
    except LIBRARY_ERRORS as exc:
        msg = str(exc)
        assert "kind" in msg or "log_time_scale='auto'" in msg, msg  # an unsupported kind, or USA overflow
        assert not (kind == "usa" and scale == "auto" and "log_time_scale" in msg)  # the fix itself works
        return
    numbers = _numbers(value)
    assert not np.any(np.isnan(numbers)), f"{name} has NaN"
    if name not in MAY_BE_INFINITE:
        assert np.all(np.isfinite(numbers)), f"{name} is infinite"
    elif not np.all(np.isfinite(numbers)):
        assert np.max(model.log_head_energies(XS)) > np.log(np.finfo(float).max) - np.log(XS.shape[0] ** 2)


# ------------------------------------------------------------------ generated shape disagreements
def _pts(n, d, seed=0):
    return particles.sample_uniform(n, d=d, rng=seed)


def _w(m):
    return np.full(m, 1.0 / m)


# name -> (builder(n, m, d, e) of a call whose two arrays disagree when (n, d) != (m, e), names)
SHAPES = {
    "EmpiricalMeasure points/weights": (lambda n, m, d, e: (mf.EmpiricalMeasure,
                                                            dict(points=_pts(n, d), weights=_w(m))),
                                        "length", ["weights"]),
    "n_clusters x/weights": (lambda n, m, d, e: (metrics.n_clusters, dict(x=_pts(n, d), weights=_w(m))),
                             "length", ["weights"]),
    "distance_to_uniform x/weights": (lambda n, m, d, e: (metrics.distance_to_uniform,
                                                          dict(x=_pts(n, d), weights=_w(m))), "length", ["weights"]),
    "measure_energy points/weights": (lambda n, m, d, e: (mf.measure_energy, dict(
        model=particles.MultiHead(np.eye(d), kind="softmax"), points=_pts(n, d), weights=_w(m))),
                                      "length", ["weights"]),
    "wasserstein x/y": (lambda n, m, d, e: (metrics.wasserstein, dict(x=_pts(n, d), y=_pts(m, e, 1))),
                        "dim", ["x", "y"]),
    "sliced_wasserstein_sphere x/y": (lambda n, m, d, e: (metrics.sliced_wasserstein_sphere,
                                                          dict(x=_pts(n, d), y=_pts(m, e, 1))), "dim", ["x", "y"]),
    "geodesic_cost x/y": (lambda n, m, d, e: (metrics.geodesic_cost, dict(x=_pts(n, d), y=_pts(m, e, 1))),
                          "dim", ["x", "y"]),
    "MultiHead M/W": (lambda n, m, d, e: (particles.MultiHead, dict(M=np.stack([np.eye(d)] * n),
                                                                   W=np.stack([np.eye(e)] * m))), "both", ["W"]),
    "Ensemble M/W": (lambda n, m, d, e: (particles.Ensemble, dict(M=np.stack([np.eye(d)] * n),
                                                                 W=np.stack([np.eye(e)] * m), beta=[1.0])),
                     "both", ["W"]),
    "from_qk Q/K": (lambda n, m, d, e: (particles.MultiHead.from_qk, dict(Q=np.stack([np.eye(d)] * n),
                                                                         K=np.stack([np.eye(e)] * m), W=np.eye(d))),
                    "both", ["Q", "K"]),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
@settings(max_examples=15, deadline=None, database=None, derandomize=True)
@given(n=st.integers(1, 6), m=st.integers(1, 6), d=st.integers(2, 4), e=st.integers(2, 4))
def test_generated_shape_disagreements_raise_library_error(case, n, m, d, e):
    build, what, names = SHAPES[case]
    # "length": only the lengths may disagree (same d); "dim": only the dimensions; "both": either
    if what == "length":
        e = d
        assume(n != m)
    elif what == "dim":
        assume(d != e)
    else:
        assume((n, d) != (m, e))
    fn, kwargs = build(n, m, d, e)
    _raises_naming(fn, kwargs, names)


@pytest.mark.parametrize("beta", [1.0, 1e3, 1e4])
def test_stationary_state_has_zero_rates_at_every_beta(beta):
    """All tokens at one point: every softmax mean is the token itself, so ẋ = 0 and every rate is
    exactly 0 (each term of the log-domain sum is 0), also where E_h overflows float64."""
    x = np.tile([[0.0, 0.0, 1.0]], (7, 1))  # exactly unit: the projection of x on itself is exactly 0
    out = particles.diagnose(_model("softmax", beta, symmetric=True), x)
    assert out["kinetic"] == 0.0 and out["energy_rate"] == 0.0 and out["rate_residual"] == 0.0
    assert np.all(out["head_energy_rate"] == 0.0)


@pytest.mark.parametrize("beta", [2.0, 1e3])
def test_energy_gradient_of_heads_of_opposite_sign(beta):
    """M_1 = I, M_2 = -I on an antipodal configuration: both heads' gradients are of order e^beta;
    their sum is the sum of the per-head gradients where finite, and ±inf (never NaN) past float64."""
    model = particles.MultiHead(np.stack([np.eye(3), -np.eye(3)]), beta=beta, kind="softmax")
    x = particles.normalize(np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8]]))
    grad = model.energy_gradient(x)
    assert not np.any(np.isnan(grad))
    per_head = model._head_gradients(x, model._exp_sums(x))
    if beta < 700:
        np.testing.assert_allclose(grad, per_head.sum(axis=0), rtol=1e-13, atol=1e-15)
    else:
        finite = np.all(np.isfinite(per_head), axis=0)
        np.testing.assert_allclose(grad[finite], per_head.sum(axis=0)[finite], rtol=1e-13, atol=1e-15)
        assert np.any(np.isinf(grad))


def test_dopri5_systems_refuses_a_step_stride():
    """SaveAt(every=k) counts steps; dopri5_systems gives each system steps of its own, so the
    stride has nothing to count (it used to save at three arbitrary times)."""
    ens = particles.Ensemble(np.eye(3), beta=[1.0, 2.0])
    xs = np.stack([X, X])
    with pytest.raises(particles.InvalidParameterError, match=r"SaveAt\(every=k\) counts steps.*SaveAt\(ts=...\)"):
        particles.simulate(xs, ens, t1=1.0, dt=0.1, method="dopri5_systems", save=particles.SaveAt(every=2))
    ts = np.linspace(0.0, 1.0, 5)
    traj = particles.simulate(xs, ens, t1=1.0, dt=0.1, method="dopri5_systems", save=particles.SaveAt(ts=ts))
    np.testing.assert_array_equal(traj.t, ts)
