"""The bad-input suite: every public callable of every package, fed invalid arguments, must raise
the library's own error (:data:`particles.validation.LIBRARY_ERRORS`), never return silently and never
leak a numpy/POT/xarray exception; the message must read well (no doubled word, no parameter quoted twice).

Its inputs are of two sources, run together, one test per callable:

- **generated** from the declarations (:func:`particles.validation.declare`): each declared
  parameter gets the invalid values its own constraint derives (each side of each interval, wrong
  types, NaN and inf, wrong shapes, each option misspelt) and each relation its breaking arguments;
  the refusal must name the parameter. A public callable must be declared (:data:`UNDECLARED` may
  only shrink);
- **tagged**: ``CASES`` lists, for each public callable, a valid call and the tag of each argument;
  the values of :data:`BAD` for that tag that the generation does not already produce are run too
  (the hand-written kinds of badness: rows off the sphere, ragged lists, wrong-size weights, ...).

``test_every_public_name_is_covered`` fails when a name of an ``__all__`` has no valid call here.
Arguments that are valid alone but disagree together (shapes, dimensions, head counts) are in
``tests/test_bad_combinations.py``, whose coverage test reads the array tags of ``CASES``; bad
environments (filesystem, worker processes) in ``tests/test_bad_environment.py``; the constraints
themselves and the command line's use of them in ``tests/test_declared_params.py``.
"""

import inspect
import tempfile

import numpy as np
import pytest

import meanfield as mf
import metrics
import particles
from metrics import sentences, spectral_reference
from particles import theory as th
from particles.validation import LIBRARY_ERRORS, InvalidParameterError, declaration
from tests.helpers import garbled

X = particles.sample_uniform(5, d=3, rng=0)
MODEL = particles.MultiHead(np.eye(3), beta=1.0, kind="softmax")
USA = particles.MultiHead(np.eye(3), beta=1.0, kind="usa")
TRAJ = particles.simulate(X, MODEL, t1=0.1, dt=0.05)
C_PTS, C_AREAS = mf.circle_grid(16)
GRIDM = mf.GridMeasure(C_PTS, C_AREAS, np.full(16, 1 / 16))
MODEL2 = particles.MultiHead(np.eye(2), beta=1.0, kind="softmax")
STUDY_DS = __import__("xarray").Dataset(
    {"w1": (("n_particles", "seed", "time"), np.array([[[0.1], [0.12]], [[0.05], [0.06]]])),
     "rate_w1": (("time",), [-0.5]), "rate_w1_ci": (("time", "bound"), [[-0.6, -0.4]])},
    coords={"n_particles": [100, 400], "time": [0.0]})

TRAJ_DS = metrics.trajectory_to_dataset(particles.simulate(X, MODEL, t1=0.1, dt=0.05,
                                                           save=particles.SaveAt(ts=[0.0, 0.1])), MODEL)
TRAJ_DS2 = metrics.trajectory_to_dataset(particles.simulate(X[:, :2] / np.linalg.norm(X[:, :2], axis=1, keepdims=True),
                                                            MODEL2, t1=0.1, dt=0.05), MODEL2)
ANIMATION = __import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "tokens.gif"
PHASE_DS = metrics.phase_diagram([1.0, 2.0], n=4, d=2, t1=0.5, n_systems=2, n_saves=2)
GEO_DS = metrics.head_geometry(particles.AttentionWeights(*np.random.default_rng(5).standard_normal((3, 2, 2, 4)),
                                                         Wo=np.random.default_rng(6).standard_normal((2, 4, 2))))
CHAOS_DS = __import__("xarray").Dataset(
    {"distance": (("n_particles", "seed", "time"), np.array([[[0.1, 0.2]], [[0.05, 0.1]]])),
     "t_delta": (("delta", "n_particles", "seed"), [[[1.0], [2.0]]]), "slope": (("delta",), [1.0]),
     "slope_ci": (("delta", "bound"), [[0.5, 1.5]]), "sigma_star": 0.5},
    coords={"n_particles": [100, 400], "time": [0.0, 1.0], "delta": [0.1]})
GRID_DS = __import__("xarray").Dataset({"t_merge": (("beta", "seed"), [[1.0, 2.0], [0.5, 1.0]])},
                                       coords={"beta": [1.0, 2.0], "seed": [0, 1]}, attrs={"grid_axes": '["beta"]'})


def _RHO2(x):
    return 1 + 0.5 * x[:, 0]


def _RHO3(x):
    return 1 + 0.5 * x[:, 2]


_common = [None, "abc", {"a": 1}, 1j, [1.0, 2.0j]]
# the spread a property-based draw covered, written out: rows off the sphere (1 to 6 of them, norms 2 to 10),
# negative reals from -1e-9 to -1e6 and negative integers down to -10**6
_OFF_SPHERE = [np.full((n, 3), v) for n, v in ((1, 2.0), (2, 10.0), (3, 3.5), (4, 7.0), (6, 2.5))] + [2.0 * np.eye(3)]
_NEGATIVE = [-1e-9, -1e-3, -0.37, -7.5, -1e3, -1e6]
_NEGATIVE_INT = [-2, -7, -1000, -123457, -10**6]
#: tag -> the invalid values of an argument of that tag (deterministic: what a property-based draw
#: sampled, with its random parts at their ends: far rows, tiny and huge negatives)
BAD = {
    # point clouds (n, d) on the sphere
    "points": _common + [np.ones(5), np.zeros((0, 3)), np.ones((2, 3, 3)), np.eye(3) * (1 + 1j),
                         np.array([[np.nan, 0, 0]]), np.array([[np.inf, 0, 0]]), np.eye(3, dtype=bool),
                         [[1.0, 0.0, 0.0], [1.0]], np.zeros((3, 3)), *_OFF_SPHERE],
    "weights": _common + [np.ones(5), -np.ones(5) / 5, np.ones(4) / 4, np.full(5, np.nan), np.ones((5, 1)) / 5],
    "pos": _common + [0.0, -1.0, np.nan, np.inf, -np.inf, "1", True, np.ones(2), *_NEGATIVE],
    "nonneg": _common + [-1.0, np.nan, np.inf, "1", np.ones(2), *_NEGATIVE],
    "real": _common + [np.nan, np.inf, "1", np.ones(2)],
    "int": _common + [0, -1, 1.5, np.nan, np.inf, "3", 10**400, *_NEGATIVE_INT],
    "choice": [None, "bogus", 3, ["softmax"]],
    "callable": [None, 3, "f", [1]],
    "model": [None, "model", 3, np.eye(3)],
    "bool": ["yes", 2, None, 1.0],
    "str": [None, 3, ["a"], b"bytes"],
    "count": [-1, 1.5, np.nan, "3", None, 1j],
    "times": [None, "abc", np.array([np.nan]), 1j, [[1j]]],
    "matrix": _common + [np.ones((3, 4)), np.array([[np.nan, 0], [0, 1]]), np.ones((2, 2, 3)), np.zeros((0, 3, 3))],
    "rng": [-1, "seed", 1.5, [1j], {"a": 1}],
    "array": _common + [np.array([np.nan]), np.array([np.inf]), np.array([], dtype=float)],
    "stack": _common + [X, np.ones((2, 5, 3)), np.full((1, 5, 3), np.nan)],
}

# name -> (callable, valid kwargs, {argument: tag})
CASES = {
    # ------------------------------------------------------------------ particles
    "particles.MultiHead": (particles.MultiHead, dict(M=np.eye(3), beta=1.0),
                            {"M": "matrix", "W": "matrix", "beta": "nonneg", "kind": "choice", "geometry": "choice",
                             "block_elements": "int"}),
    "particles.MultiHead.scalar": (particles.MultiHead.scalar, dict(lambdas=[1.0], d=3),
                                   {"lambdas": "array", "d": "int"}),
    "particles.MultiHead.from_qk": (particles.MultiHead.from_qk, dict(Q=np.eye(3), K=np.eye(3), W=np.eye(3)),
                                    {"Q": "matrix", "K": "matrix", "W": "matrix_nn"}),
    "particles.MultiHead.velocity": (MODEL.velocity, dict(x=X), {"x": "points"}),
    "particles.MultiHead.energy": (USA.energy, dict(x=X), {"x": "points"}),
    "particles.MultiHead.entropy": (MODEL.entropy, dict(x=X), {"x": "points"}),
    "particles.MultiHead.weights": (MODEL.weights, dict(x=X), {"x": "points"}),
    "particles.MultiHead.sums": (MODEL.sums, dict(x=X), {"x": "points", "sources": "points"}),
    "particles.MultiHead.outputs": (MODEL.outputs, dict(x=X), {"x": "points"}),
    "particles.MultiHead.replace": (MODEL.replace, dict(beta=2.0), {"beta": "nonneg", "kind": "choice", "M": "matrix"}),
    "particles.MultiHead.from_attrs": (particles.MultiHead.from_attrs, dict(attrs=MODEL.to_attrs()),
                                       {"attrs": "model"}),
    "particles.Ensemble": (particles.Ensemble, dict(M=np.eye(3), beta=[1.0]),
                           {"M": "matrix", "W": "matrix_nn", "beta": "array", "kind": "choice", "chunk": "int"}),
    "particles.Ensemble.velocity": (particles.Ensemble(np.eye(3), beta=[1.0]).velocity, dict(x=X[None]),
                                    {"x": "stack"}),
    "particles.Ensemble.settled": (particles.Ensemble(np.eye(3), beta=[1.0]).settled, dict(x=X[None], diameter=0.1),
                                   {"x": "stack", "diameter": "pos"}),
    "particles.Ensemble.exps_per_evaluation": (particles.Ensemble(np.eye(3), beta=[1.0]).exps_per_evaluation,
                                               dict(n=4), {"n": "int"}),
    "particles.Ensemble.subset": (particles.Ensemble(np.eye(3), beta=[1.0]).subset, dict(keep=[True]),
                                  {"keep": "str"}),
    "particles.Ensemble.settling": (particles.Ensemble(np.eye(3), beta=[1.0]).settling, dict(diameter=0.1),
                                    {"diameter": "pos", "check_every": "int"}),
    "particles.tqdm_class": (particles.tqdm_class, dict(), {}),
    "particles.num_threads": (particles.num_threads, dict(), {}),
    "particles.set_num_threads": (particles.set_num_threads, dict(n=None), {"n": "int"}),
    "particles.simulate": (particles.simulate, dict(x0=X, field=MODEL, t1=0.1, dt=0.05),
                           {"x0": "points", "field": "callable", "t1": "real", "dt": "pos", "method": "choice",
                            "kappa": "kappa", "rng": "rng", "rtol": "pos", "max_steps": "int", "check_every": "int",
                            "on_failure": "choice", "progress": "bool", "save": "model"}),
    "particles.events.min_distance": (particles.events.min_distance, dict(eps=0.1),
                                      {"eps": "pos", "metric": "choice", "direction": "real"}),
    "particles.events.energy_reaches": (particles.events.energy_reaches, dict(model=MODEL, E=1.0),
                                        {"model": "model", "E": "real"}),
    "particles.events.smallest_distance": (particles.events.smallest_distance, dict(x=X), {"metric": "choice"}),
    "particles.SaveAt": (particles.SaveAt, dict(), {"ts": "array", "every": "int", "t0": "bool", "x": "bool",
                                                     "fn": "callable"}),
    "particles.Trajectory": (particles.Trajectory, dict(t=np.zeros(1), x=None, saved={"a": np.zeros(1)}),
                             {"t": "times", "status": "choice", "n_steps": "count", "saved": "model"}),
    "particles.diagnose": (particles.diagnose, dict(model=MODEL, x=X), {"model": "model", "x": "points",
                                                                         "include": "choice"}),
    "particles.diagnostics_fn": (particles.diagnostics_fn, dict(model=MODEL), {"model": "model", "include": "choice"}),
    "particles.project_tangent": (particles.project_tangent, dict(x=X, v=X), {"x": "points", "v": "array"}),
    "particles.retract": (particles.retract, dict(x=X, v=np.zeros_like(X)), {"x": "points", "v": "array"}),
    "particles.normalize": (particles.normalize, dict(y=X), {"y": "array"}),
    "particles.exp_map": (particles.exp_map, dict(x=X, v=np.zeros_like(X)), {"x": "points", "v": "array"}),
    "particles.geodesic_distance": (particles.geodesic_distance, dict(x=X, y=X), {"x": "points", "y": "points"}),
    "particles.sample_uniform": (particles.sample_uniform, dict(n=3, d=3), {"n": "int", "d": "int", "rng": "rng"}),
    "particles.seed_streams": (particles.seed_streams, dict(seed=0), {"seed": "nonneg_int"}),
    "particles.equiangular_tokens": (th.equiangular_tokens, dict(n=3, rho=0.2), {"n": "int", "rho": "real"}),
    "particles.orthogonal_tokens": (th.orthogonal_tokens, dict(n=3), {"n": "int", "rng": "rng"}),
    "particles.check_param": (particles.check_param, dict(value=1.0, name="v", low=0.0), {"value": "nonneg"}),
    "particles.check_points": (particles.check_points, dict(x=X), {"x": "points"}),
    "particles.check_weights": (particles.check_weights, dict(weights=None, n=5), {"weights": "weights_nn"}),
    # ------------------------------------------------------------------ particles.theory
    "theory.mean_rho": (th.mean_rho, dict(x=X), {"x": "points"}),
    "theory.c_star": (th.c_star, dict(H=2), {"H": "pos"}),
    "theory.beta_star": (th.beta_star, dict(H=2, n=4, alpha=1.0), {"H": "pos", "n": "int", "alpha": "pos"}),
    "theory.cos_angle_orthogonal": (th.cos_angle_orthogonal, dict(beta=1.0, n=4, alpha=1.0),
                                    {"beta": "nonneg", "n": "int", "alpha": "nonneg"}),
    "theory.equiangular_rhs": (th.equiangular_rhs, dict(rho=0.1, lambdas=[1.0], beta=1.0, n=4),
                               {"rho": "array", "lambdas": "array", "beta": "nonneg", "n": "int", "kind": "choice"}),
    "theory.solve_equiangular": (th.solve_equiangular, dict(rho0=0.1, ts=[0, 1], lambdas=[1.0], beta=1.0, n=4),
                                 {"rho0": "real", "ts": "array", "lambdas": "array", "beta": "nonneg", "n": "int",
                                  "rtol": "pos"}),
    "theory.rho_beta0": (th.rho_beta0, dict(t=1.0, Lambda=1.0, n=4), {"t": "array", "Lambda": "real", "n": "int"}),
    "theory.time_to_rho_beta0": (th.time_to_rho_beta0, dict(r=0.5, Lambda=1.0, n=4),
                                 {"r": "array", "Lambda": "pos", "n": "int"}),
    "theory.hitting_time": (th.hitting_time, dict(rho0=0.1, rho1=0.5, lambdas=[1.0], beta=1.0, n=4),
                            {"rho0": "real", "rho1": "real", "lambdas": "array", "beta": "nonneg", "n": "int"}),
    "theory.phi": (th.phi, dict(lam=1.0, beta=1.0, n=4), {"lam": "array", "beta": "nonneg", "n": "int"}),
    "theory.lambda_max": (th.lambda_max, dict(beta=1.0, n=4), {"beta": "pos", "n": "int"}),
    "theory.lambda_c": (th.lambda_c, dict(beta=1.0, n=4), {"beta": "pos", "n": "int"}),
    "theory.early_rate": (th.early_rate, dict(lambdas=[1.0], beta=1.0, n=4),
                          {"lambdas": "array", "beta": "nonneg", "n": "int"}),
    "theory.late_rate": (th.late_rate, dict(lambdas=[1.0]), {"lambdas": "array"}),
    "theory.superadditivity_gain": (th.superadditivity_gain, dict(lambdas=[1.0, 2.0], beta=1.0, n=4),
                                    {"lambdas": "array", "beta": "nonneg", "n": "int"}),
    "theory.relu_time_linear": (th.relu_time_linear, dict(rho0=0.1, lambdas=[1.0], beta=1.0, n=4),
                                {"rho0": "pos", "lambdas": "array", "beta": "pos", "n": "int"}),
    "theory.softmax_time_linear": (th.softmax_time_linear, dict(lambdas=[1.0], beta=1.0, n=4),
                                   {"lambdas": "array", "beta": "nonneg", "n": "int"}),
    "theory.entropy_equiangular": (th.entropy_equiangular, dict(rho=0.1, n=4, beta=1.0, lam=1.0),
                                   {"rho": "array", "n": "int", "beta": "nonneg", "lam": "real"}),
    # ------------------------------------------------------------------ meanfield
    "meanfield.EmpiricalMeasure": (mf.EmpiricalMeasure, dict(points=X), {"points": "points", "weights": "weights"}),
    "meanfield.GridMeasure": (mf.GridMeasure, dict(points=C_PTS, areas=C_AREAS, mass=np.full(16, 1 / 16)),
                              {"points": "points", "areas": "array", "mass": "array"}),
    "meanfield.circle_grid": (mf.circle_grid, dict(m=8), {"m": "int"}),
    "meanfield.fibonacci_sphere": (mf.fibonacci_sphere, dict(m=8), {"m": "int"}),
    "meanfield.measure_velocity": (mf.measure_velocity, dict(model=MODEL, points=X),
                                   {"model": "model", "points": "points", "weights": "weights", "at": "points"}),
    "meanfield.measure_energy": (mf.measure_energy, dict(model=MODEL, points=X),
                                 {"model": "model", "points": "points", "weights": "weights"}),
    "meanfield.first_variation": (mf.first_variation, dict(model=MODEL, points=X),
                                  {"model": "model", "points": "points", "weights": "weights"}),
    "meanfield.wasserstein_ascent": (mf.wasserstein_ascent, dict(mu0=GRIDM, model=MODEL2, t1=0.05, scheme="fv_circle"),
                                     {"mu0": "model", "model": "model", "t1": "real", "n_saves": "int",
                                      "scheme": "choice", "kappa": "kappa", "cfl": "pos", "max_steps": "int"}),
    "meanfield.uniform_growth_rate": (mf.uniform_growth_rate, dict(beta=1.0, lam=1.0),
                                      {"beta": "nonneg", "lam": "array", "mu": "array", "kind": "choice",
                                       "kappa": "kappa", "k": "nonneg_int"}),
    "meanfield.critical_kappa": (mf.critical_kappa, dict(beta=1.0, lam=1.0),
                                 {"beta": "nonneg", "lam": "array", "mu": "array", "kind": "choice"}),
    # ------------------------------------------------------------------ metrics
    "metrics.wasserstein": (metrics.wasserstein, dict(x=X, y=X), {"x": "points", "y": "points", "a": "weights",
                                                                   "b": "weights", "p": "pos"}),
    "metrics.sinkhorn_divergence": (metrics.sinkhorn_divergence, dict(x=X, y=X),
                                    {"x": "points", "y": "points", "a": "weights", "reg": "pos", "max_iter": "int",
                                     "tol": "pos"}),
    "metrics.sliced_wasserstein_sphere": (metrics.sliced_wasserstein_sphere, dict(x=X, y=X),
                                          {"x": "points", "y": "points", "a": "weights", "n_projections": "int",
                                           "p": "pos", "seed": "int_or_none"}),
    "metrics.distance_to_uniform": (metrics.distance_to_uniform, dict(x=X),
                                    {"x": "points", "weights": "weights", "n_projections": "int"}),
    "metrics.geodesic_cost": (metrics.geodesic_cost, dict(x=X, y=X), {"x": "points", "y": "points", "p": "pos"}),
    "metrics.cluster_labels": (metrics.cluster_labels, dict(x=X), {"x": "points", "eps": "pos"}),
    "metrics.n_clusters": (metrics.n_clusters, dict(x=X), {"x": "points", "weights": "weights", "eps": "pos"}),
    "metrics.cluster_sizes": (metrics.cluster_sizes, dict(x=X), {"x": "points", "weights": "weights", "eps": "pos"}),
    "metrics.silhouette": (metrics.silhouette, dict(x=X, labels=[0, 0, 1, 1, 2]), {"x": "points", "labels": "weights"}),
    "metrics.n_clusters_batch": (metrics.n_clusters_batch, dict(x=X[None]), {"x": "stack", "eps": "pos"}),
    "metrics.energy": (metrics.energy, dict(x=X, model=USA), {"x": "points", "model": "model"}),
    "metrics.head_energies": (metrics.head_energies, dict(x=X, model=USA), {"x": "points", "model": "model"}),
    "metrics.log_head_energies": (metrics.log_head_energies, dict(x=X, model=USA), {"x": "points", "model": "model"}),
    "metrics.mean_entropy": (metrics.mean_entropy, dict(x=X, model=MODEL), {"x": "points", "model": "model"}),
    "metrics.leaders": (metrics.leaders, dict(x=X, model=MODEL), {"x": "points", "model": "model", "k": "int"}),
    "metrics.evaluate": (metrics.evaluate, dict(names=["n_clusters"], x=X),
                         {"names": "choice", "x": "points", "weights": "weights"}),
    "metrics.Metric": (metrics.Metric, dict(fn=len, long_name="l", units="1"),
                       {"fn": "callable", "long_name": "str", "needs_model": "bool"}),
    "metrics.model_attrs": (metrics.model_attrs, dict(model=MODEL), {"model": "model"}),
    "metrics.model_from_attrs": (metrics.model_from_attrs, dict(attrs=metrics.model_attrs(MODEL)), {"attrs": "model"}),
    "metrics.netcdf_safe": (metrics.netcdf_safe, dict(attrs={}), {"attrs": "model"}),
    "metrics.trajectory_to_dataset": (metrics.trajectory_to_dataset, dict(traj=TRAJ),
                                      {"traj": "model", "model": "model", "title": "str"}),
    "metrics.default_model": (metrics.default_model, dict(params=dict(n_heads=1, d=3, beta=1.0, kind="softmax"),
                                                          rng=np.random.default_rng(0)),
                              {"params": "model", "rng": "rng"}),
    "metrics.SweepModel": (metrics.SweepModel, dict(M=np.eye(3), log_time_scale="auto"),
                           {"M": "matrix_nn", "W": "matrix_nn", "geometry": "choice", "summation": "choice",
                            "tol": "pos"}),
    "metrics.run_sweep": (metrics.run_sweep, dict(grid={"beta": [1.0]}, t1=0.1, dt=0.05, n_saves=2),
                          {"grid": "model", "n_seeds": "int", "t1": "pos", "dt": "pos", "n_saves": "int",
                           "method": "choice", "metrics": "choice", "model_fn": "callable", "engine": "choice",
                           "max_workers": "int", "progress": "bool"}),
}

# ------------------------------------------------------------------ cases of the misalignment, orthogonality,
# radial-dominance, critical-point, metastability, stability, variants and provenance modules
SCALAR = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=1.0, kind="usa")
SCALAR_SM = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
TRAJ3 = particles.simulate(X, SCALAR, t1=0.2, dt=0.05, save=particles.SaveAt(ts=np.linspace(0.0, 0.2, 4)))
CASES.update({
    "particles.misaligned_model": (particles.misaligned_model, dict(M=np.eye(3), Delta=0.1 * np.eye(3), beta=1.0),
                                   {"M": "matrix", "Delta": "matrix", "beta": "nonneg", "geometry": "choice",
                                    "log_time_scale": "real"}),
    "particles.value_misalignment": (particles.value_misalignment, dict(model=SCALAR), {"model": "model"}),
    "particles.delta_v": (particles.delta_v, dict(model=SCALAR), {"model": "model", "x": "points"}),
    "particles.misalignment_rates": (particles.misalignment_rates, dict(model=SCALAR, x=X),
                                     {"model": "model", "x": "points"}),
    "particles.misalignment_fn": (particles.misalignment_fn, dict(model=SCALAR), {"model": "model"}),
    "particles.orthogonality_defect": (particles.orthogonality_defect, dict(M=np.eye(3)), {"M": "matrix"}),
    "particles.head_rate_bounds": (particles.head_rate_bounds, dict(model=SCALAR, x=X),
                                   {"model": "model", "x": "points"}),
    "particles.head_rate_bounds_fn": (particles.head_rate_bounds_fn, dict(model=SCALAR), {"model": "model"}),
    "particles.rd_margins": (particles.rd_margins, dict(model=SCALAR, x=X), {"model": "model", "x": "points"}),
    "particles.radial_dominance": (particles.radial_dominance, dict(model=SCALAR, traj=TRAJ3),
                                   {"model": "model", "traj": "stack", "ts": "array"}),
    "particles.rd_threshold": (particles.rd_threshold,
                               dict(make_model=lambda b: particles.MultiHead.scalar([1.0, 0.5], d=3, beta=b),
                                    x0=X, t1=0.1, bracket=(0.0, 1.0), n_grid=2, xtol=0.3, n_saves=3),
                               {"make_model": "callable", "x0": "points", "t1": "nonneg", "bracket": "array",
                                "candidate": "choice", "n_grid": "int", "xtol": "pos", "n_saves": "int",
                                "dt": "pos", "method": "choice"}),
    "particles.rd_threshold_equiangular": (particles.rd_threshold_equiangular, dict(t1=0.5, n=4, n_saves=5, xtol=1e-3),
                                           {"t1": "nonneg", "n": "int", "H": "int", "alpha": "pos", "n_saves": "int",
                                            "xtol": "pos"}),
    "particles.tangent_basis": (particles.tangent_basis, dict(x=X), {"x": "points"}),
    "particles.euclidean_hessian": (particles.euclidean_hessian, dict(model=SCALAR, x=X),
                                    {"model": "model", "x": "points"}),
    "particles.riemannian_hessian": (particles.riemannian_hessian, dict(model=SCALAR, x=X),
                                     {"model": "model", "x": "points"}),
    "particles.field_jacobian": (particles.field_jacobian, dict(model=SCALAR, x=X),
                                 {"model": "model", "x": "points", "step": "pos"}),
    "particles.hessian_spectrum": (particles.hessian_spectrum, dict(model=SCALAR, x=X),
                                   {"model": "model", "x": "points", "rtol": "pos"}),
    "particles.find_critical_point": (particles.find_critical_point, dict(model=SCALAR, x0=X, max_iter=2),
                                      {"model": "model", "x0": "points", "tol": "pos", "max_iter": "int",
                                       "damping": "nonneg", "step": "pos"}),
    "particles.TimeDependent": (particles.TimeDependent, dict(weights_fn=lambda t: (np.eye(3), np.eye(3)),
                                                              template=SCALAR_SM),
                                {"weights_fn": "callable", "template": "model"}),
    "particles.simulate_layers": (particles.simulate_layers, dict(x0=X, layers=[MODEL, MODEL], dt=0.5),
                                  {"x0": "points", "layers": "model", "layer_time": "pos", "dt": "pos",
                                   "method": "choice", "n_saves_per_layer": "int"}),
    "theory.cos_angle_equiangular": (th.cos_angle_equiangular, dict(rho=0.1, beta=1.0, n=4),
                                     {"rho": "array", "beta": "nonneg", "n": "int", "alpha": "nonneg"}),
    "meanfield.funk_hecke_exp": (mf.funk_hecke_exp, dict(a=1.0, l=1), {"a": "real", "l": "nonneg_int", "d": "int"}),
    "meanfield.growth_rates": (mf.growth_rates, dict(model=SCALAR, l_max=3),
                               {"model": "model", "l_max": "nonneg_int", "kappa": "kappa"}),
    "meanfield.harmonic_growth": (mf.harmonic_growth, dict(model=SCALAR, harmonic_fn=lambda p: p[:, 2], m=40,
                                                           t1=0.02, n_saves=3),
                                  {"model": "model", "harmonic_fn": "callable", "m": "int", "t1": "pos",
                                   "n_saves": "int", "kappa": "kappa", "eps": "pos", "scheme": "choice"}),
    "meanfield.sphere_quadrature": (mf.sphere_quadrature, dict(d=3, n=4), {"d": "int", "n": "int"}),
    "meanfield.ZonalMeasure": (mf.ZonalMeasure, dict(density_fn=lambda x: 1 + x[:, -1], d=4),
                               {"density_fn": "callable", "d": "int", "axis": "array"}),
    "meanfield.funk_hecke_log": (mf.funk_hecke_log, dict(a=1.0, l=[0, 1], d=3),
                                 {"a": "real", "l": "nonneg_int", "d": "int"}),
    "meanfield.sht_backend": (mf.sht_backend, dict(), {}),
    "meanfield.sphere_harmonic_transform": (mf.sphere_harmonic_transform, dict(L=4, nlat=6),
                                            {"L": "nonneg_int", "nlat": "int", "backend": "choice"}),
    "metrics.plateaus": (metrics.plateaus, dict(t=np.linspace(0.1, 1.0, 6), values=np.ones(6)),
                         {"t": "array", "values": "array", "rtol": "pos", "min_duration": "nonneg",
                          "log_time": "bool"}),
    "metrics.cluster_energy": (metrics.cluster_energy, dict(model=SCALAR, centres=X[:2], masses=[0.5, 0.5]),
                               {"model": "model", "centres": "points", "masses": "weights"}),
    "metrics.staircase": (metrics.staircase, dict(model=SCALAR, traj=TRAJ3),
                          {"model": "model", "traj": "stack", "ts": "array", "eps": "pos", "rtol": "pos",
                           "min_duration": "nonneg", "log_time": "bool"}),
    # limit study: rates, transport, densities, report
    "metrics.fit_rate": (metrics.fit_rate, dict(n_values=[10.0, 40.0, 160.0], gaps=np.ones((3, 2)) * [[1.0], [0.5],
                                                                                                     [0.25]]),
                         {"n_values": "array", "gaps": "array", "paired": "bool", "level": "pos", "interval": "choice",
                          "n_boot": "int", "rng": "rng"}),
    "metrics.SlicedReference": (metrics.SlicedReference, dict(ref_points=X[None]),
                                {"ref_points": "stack", "n_projections": "int", "n_quantiles": "int"}),
    "metrics.circle_wasserstein": (metrics.circle_wasserstein, dict(theta=[0.1, 1.0], atoms=[0.5, 2.0, 3.0]),
                                   {"theta": "array", "atoms": "array", "p": "int", "method": "choice",
                                    "weights": "weights", "atom_weights": "weights"}),
    "metrics.circle_quantile_atoms": (metrics.circle_quantile_atoms, dict(mass=np.ones(4) / 4, M=8),
                                      {"mass": "array", "M": "int"}),
    "metrics.sliced_wasserstein_embedded": (metrics.sliced_wasserstein_embedded, dict(x=X, y=X),
                                            {"x": "points", "y": "points", "n_projections": "int"}),
    "metrics.limit_study_table": (metrics.limit_study_table, dict(ds=STUDY_DS),
                                  {"ds": "model", "time": "real", "variables": "str"}),
    "metrics.limit_study_frame": (metrics.limit_study_frame, dict(ds=STUDY_DS),
                                  {"ds": "model", "time": "real", "variables": "str"}),
    "metrics.plot_limit_study": (metrics.plot_limit_study, dict(ds=STUDY_DS),
                                 {"ds": "model", "var": "str", "times": "times", "guide": "bool"}),
    # figures and animations
    "metrics.plot_curves": (metrics.plot_curves, dict(ds=TRAJ_DS), {"ds": "model", "names": "str", "log_time": "bool"}),
    "metrics.plot_angles": (metrics.plot_angles, dict(ds=TRAJ_DS2), {"ds": "model", "log_time": "bool"}),
    "metrics.plot_sphere": (metrics.plot_sphere, dict(ds=TRAJ_DS), {"ds": "model", "time": "real", "elev": "real",
                                                                    "azim": "real"}),
    "metrics.animate": (metrics.animate, dict(ds=TRAJ_DS, path=ANIMATION, dpi=20),
                        {"ds": "model", "fps": "int", "stride": "int", "dpi": "int", "size": "pos",
                         "elev": "real", "azim": "real"}),
    "metrics.plot_phase_diagram": (metrics.plot_phase_diagram, dict(ds=PHASE_DS),
                                   {"ds": "model", "statistic": "choice", "curve": "bool", "colorbar": "bool"}),
    "metrics.plot_chaos_collapse": (metrics.plot_chaos_collapse, dict(ds=CHAOS_DS),
                                    {"ds": "model", "collapse": "bool"}),
    "metrics.plot_chaos_horizon": (metrics.plot_chaos_horizon, dict(ds=CHAOS_DS), {"ds": "model", "delta": "pos"}),
    "metrics.plot_head_geometry": (metrics.plot_head_geometry, dict(ds=GEO_DS), {"ds": "model", "names": "str"}),
    "metrics.plot_study": (metrics.plot_study, dict(ds=GRID_DS), {"ds": "model", "names": "str"}),
    "metrics.density_of_angle": (metrics.density_of_angle, dict(f=np.cos), {"f": "callable"}),
    "metrics.check_density_fn": (metrics.check_density_fn, dict(density_fn=lambda y: 1 + y[:, 0], d=3),
                                 {"density_fn": "callable", "d": "int"}),
    "metrics.circle_density_quantile": (metrics.circle_density_quantile, dict(density_fn=_RHO2, u=[0.1, 0.5]),
                                        {"density_fn": "callable", "u": "array", "m": "int"}),
    "metrics.sample_circle_density": (metrics.sample_circle_density, dict(density_fn=_RHO2, n=3, rng=0),
                                      {"density_fn": "callable", "n": "int", "rng": "rng", "m": "int"}),
    "metrics.sample_sphere_density": (metrics.sample_sphere_density, dict(density_fn=_RHO3, n=3, d=3, rng=0),
                                      {"density_fn": "callable", "n": "int", "d": "int", "rng": "rng", "bound": "pos",
                                       "m_grid": "int"}),
    "metrics.ExpressionDensity": (metrics.ExpressionDensity, dict(text="1 + x1", d=3), {"text": "str", "d": "int"}),
    "metrics.FamilyDensity": (metrics.FamilyDensity, dict(family="uniform", d=3), {"family": "choice", "d": "int"}),
    "metrics.dependency_versions": (metrics.dependency_versions, dict(), {}),
    "metrics.clustered_pair_fraction": (metrics.clustered_pair_fraction, dict(x=X[None]),
                                        {"x": "stack", "rho_c": "real"}),
    "metrics.phase_diagram": (metrics.phase_diagram, dict(model=[1.0], n=4, d=2, t1=0.5, n_systems=2, n_saves=2),
                              {"model": "array", "n": "int", "d": "int", "t1": "pos",
                               "n_systems": "int", "chunk": "int", "n_saves": "int", "statistic": "choice",
                               "rho_c": "real", "eps": "pos", "init": "choice", "method": "choice", "dt": "pos",
                               "rtol": "pos", "drop_settled": "bool", "seed": "int_or_none", "engine": "choice",
                               "max_workers": "int",
                               "progress": "bool"}),
    "metrics.summation_paths": (metrics.summation_paths, dict(), {"check_import": "bool"}),
    "metrics.provenance": (metrics.provenance, dict(config={"a": 1}, seeds={"x0": 0}, model=MODEL),
                           {"config": "model", "seeds": "model", "model": "model"}),
})
# ------------------------------------------------------------------ trained heads (issue 36)
_R = np.random.default_rng(36)
GPT2_T = {"h.0.attn.c_attn.weight": _R.standard_normal((4, 12)), "h.0.attn.c_proj.weight": _R.standard_normal((4, 4))}
AW3 = particles.AttentionWeights(*_R.standard_normal((3, 1, 2, 3)), Wo=_R.standard_normal((1, 3, 2)))
CASES.update({
    "particles.load_attention": (particles.load_attention, dict(source=GPT2_T, n_heads=2),
                                 {"n_heads": "int", "layer": "nonneg_int", "fold_norm": "bool",
                                  "architecture": "choice"}),
    "particles.load_attention_layers": (particles.load_attention_layers, dict(source=GPT2_T, n_heads=2),
                                        {"n_heads": "int", "fold_norm": "bool", "architecture": "choice"}),
    "particles.norm_sphere": (particles.norm_sphere, dict(a=_R.standard_normal((4, 3))),
                              {"a": "array", "kind": "choice"}),
    "metrics.head_geometry": (metrics.head_geometry, dict(layers=AW3), {"layers": "model", "n_tokens": "int",
                                                                        "tol": "pos"}),
    "metrics.sentence_flow": (metrics.sentence_flow, dict(layers=AW3, x0=X, t1=0.1, dt=0.05),
                              {"layers": "model", "x0": "points", "dt": "pos", "layer_time": "pos",
                               "saves_per_layer": "int", "eps": "pos"}),
})
# ------------------------------------------------------------------ the files of trained models, spectral references
_TOKENIZER = __import__("json").dumps({
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
    "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
    "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2}, "unk_token": "[UNK]"}})
_EMB = {f"embeddings.{p}_embeddings.weight": _R.standard_normal((4, 3)) for p in ("word", "position", "token_type")}


def _model_zip():
    import zipfile

    head = b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    path = ANIMATION.parent / "model.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model.safetensors", len(head).to_bytes(8, "little") + head + np.float32(1).tobytes())
        z.writestr("tokenizer.json", _TOKENIZER)
        z.writestr("config.json", "{}")
    return path


SPECTRAL = mf.wasserstein_ascent(mf.GridMeasure.from_density(C_PTS, C_AREAS, lambda x: 1 + 0.3 * x[:, 0]), MODEL2,
                                 t1=0.05, scheme="spectral", L=32).info["solution"]
CASES.update({
    "metrics.sentences.tokenize": (sentences.tokenize, dict(tokenizer_json=_TOKENIZER, text="a b"),
                                   {"tokenizer_json": "str", "text": "str"}),
    "metrics.sentences.bert_embeddings": (sentences.bert_embeddings, dict(tensors=_EMB, ids=[1, 2]),
                                          {"tensors": "str", "ids": "array", "type_ids": "array", "prefix": "str"}),
    "metrics.sentences.read_model_zip": (sentences.read_model_zip, dict(path=_model_zip()), {"path": "str"}),
    "metrics.verify": (metrics.verify, dict(path=tempfile.mkdtemp(prefix="headflow_verify_")), {"path": "str"}),
    "metrics.sentences.packaged_model_zip": (sentences.packaged_model_zip, dict(), {"distribution": "str"}),
    "metrics.spectral_reference.circle_spectral_quantiles": (spectral_reference.circle_spectral_quantiles,
                                                             dict(solution=SPECTRAL, k=0, M=8), {"M": "int"}),
    "metrics.spectral_reference.circle_spectral_wasserstein": (
        spectral_reference.circle_spectral_wasserstein, dict(theta=[0.1, 2.0], solution=SPECTRAL, k=0),
        {"p": "int", "n_quantiles": "int"}),  # theta: angles (n,) or points (n, 2), its declaration's own bad values
    "metrics.spectral_reference.circle_spectral_sample": (spectral_reference.circle_spectral_sample,
                                                          dict(solution=SPECTRAL, k=0, n=3, rng=0),
                                                          {"n": "int", "rng": "rng"}),
})
CASES["particles.load_attention"][2]["source"] = "str"
CASES["particles.load_attention_layers"][2]["source"] = "str"
# the callables of the public submodules these cases cover (the rest are constants and reference classes)
SUBMODULE_CALLABLES = {"particles.events": ("min_distance", "energy_reaches", "smallest_distance"),
                       "metrics.sentences": ("tokenize", "bert_embeddings", "read_model_zip", "packaged_model_zip",
                                             "sentence_flow"),
                       "metrics.spectral_reference": ("circle_spectral_quantiles", "circle_spectral_wasserstein",
                                                      "circle_spectral_sample")}
# ------------------------------------------------------------------ chaos horizon (metrics.horizon, metrics.chaos)
T_GRID = np.linspace(0.0, 4.0, 41)
CASES.update({
    "metrics.harmonic_amplitudes": (metrics.harmonic_amplitudes, dict(x=X, l_max=2), {"x": "points", "l_max": "int"}),
    "metrics.harmonic_multiplicity": (metrics.harmonic_multiplicity, dict(l=1, d=3), {"l": "int", "d": "int"}),
    "metrics.breakdown_time": (metrics.breakdown_time, dict(t=T_GRID, values=1e-2 * np.exp(T_GRID), delta=0.1),
                               {"t": "array", "values": "array", "delta": "array", "max_log_step": "pos"}),
    "metrics.predicted_breakdown_time": (metrics.predicted_breakdown_time, dict(amplitude0=0.01, rate=0.5, delta=0.1),
                                         {"amplitude0": "array", "rate": "pos", "delta": "array"}),
    "metrics.breakdown_law_cdf": (metrics.breakdown_law_cdf, dict(z=0.1), {"z": "array", "k": "int"}),
    "metrics.breakdown_law_mean": (metrics.breakdown_law_mean, dict(k=2), {"k": "int"}),
    "metrics.fit_horizon_slope": (metrics.fit_horizon_slope, dict(n_values=[10, 100], t_delta=np.ones((2, 3))),
                                  {"n_values": "array", "t_delta": "array", "n_boot": "int", "counts": "array"}),
    "metrics.sliced_w2_to_uniform_s2": (metrics.sliced_w2_to_uniform_s2, dict(x=X, directions=X),
                                        {"x": "points", "directions": "points"}),
    "metrics.chaos_horizon_study": (metrics.chaos_horizon_study,
                                    dict(model=particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax"),
                                         n_values=[10, 20], n_seeds=1, t1=8.0, n_saves=33, delta=0.4, dt=0.25,
                                         l_max=2, n_boot=10),
                                    {"model": "model", "n_seeds": "int", "t1": "pos", "n_saves": "int",
                                     "delta": "array", "dt": "pos", "kappa": "kappa", "l_max": "int"}),
})
BAD["real_or_none"] = [v for v in BAD["real"] if v is not None]  # None documented as the default rule
CASES["particles.Sigmoid"] = (particles.Sigmoid, dict(bias=-1.0, tokens=64),
                              {"bias": "real_or_none", "tokens": "int_or_none"})
CASES["particles.Sinkhorn"] = (particles.Sinkhorn, dict(iterations=3, tol=1e-9), {"iterations": "int"})
BAD["kappa"] = _common + [0.0, -1.0, np.nan, -np.inf, "1", np.ones(2)]
BAD["weights_nn"] = [v for v in BAD["weights"] if v is not None]  # None documented as "uniform"
BAD["matrix_nn"] = [v for v in BAD["matrix"] if v is not None]  # None documented as "W = M"
# k = 0 is meaningful (the l = 0 rate is 0 by mass conservation): only negatives/non-integers are bad
BAD["nonneg_int"] = _common + [-1, 1.5, np.nan, np.inf, "3", 10**400, *_NEGATIVE_INT]
BAD["int_or_none"] = _common[1:] + [-1, 1.5, np.nan, "3"]

# constants, types and modules of the __all__ lists: not callables taking user input
NOT_CALLABLE = {"KINDS", "DEFAULT_BLOCK_ELEMENTS", "STEPPERS", "DIAGNOSTICS", "SPHERE", "FLAT", "GEOMETRIES",
                "InvalidParameterError", "SolverError", "ConvergenceWarning", "StabilityWarning", "__version__",
                "theory", "SCHEMES",
                "METRICS", "SWEEP_PARAMS", "COORDS", "EQUIANGULAR_KINDS", "MAX_DENSE_PAIRS", "CellWarning",
                "MISALIGNMENT", "RD_CANDIDATES", "UPDATES", "CONVENTIONS", "PHASE_STATISTICS", "ResolutionWarning",
                "ARCHITECTURES", "FailedCellWarning", "StoreMigrationWarning", "VARIABLES", "CURVES",
                "EMD_MAX_ELEMENTS", "AttnAccessor", "events", "DamagedFileWarning"}
# result types built by the library (their fields are validated where they are made)
RESULTS = {"MeanFieldResult", "SpectralSolution", "SphereMesh", "circle_velocity", "mean_field_limit_study",
           "sample_grid_measure", "RateFit", "SeedStreams",
           "CriticalPoint", "HessianSpectrum", "RDReport", "RDThreshold", "Plateau", "StaircaseStep",
           "AttentionWeights", "VerifyReport"}  # made by particles.load_attention; its constructor checks every field


def _public(module, prefix):
    return {f"{prefix}.{name}" for name in module.__all__ if name not in NOT_CALLABLE | RESULTS}


def test_every_public_name_is_covered():
    public = (_public(particles, "particles") | _public(th, "theory") | _public(mf, "meanfield")
              | _public(metrics, "metrics"))
    public -= {"theory.equiangular_tokens", "theory.orthogonal_tokens"}  # covered as particles.*
    assert sorted(public - set(CASES)) == []
    for module, names in SUBMODULE_CALLABLES.items():
        mod = __import__(module, fromlist=["_"])
        callables = {n for n in mod.__all__ if callable(getattr(mod, n)) and not isinstance(getattr(mod, n), type)}
        assert callables == set(names), (module, callables ^ set(names))
        assert all(f"{module}.{n}" in CASES or f"metrics.{n}" in CASES for n in names)


def test_valid_calls_succeed():
    # the reference calls are valid: a bad-input failure below is caused by the bad argument
    for fn, kwargs, _ in CASES.values():
        fn(**kwargs)


#: public callables whose rules still live in their bodies: none (every public callable of particles,
#: meanfield and metrics is declared); kept empty so that a new undeclared name fails here
UNDECLARED = frozenset()

#: declared callables without a tagged case above (their valid call is written here)
EXTRA = {
    "metrics.mean_field_limit_study": (
        metrics.mean_field_limit_study,
        dict(model=particles.MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa"), density_fn=lambda x: 1 + 0.5 * x[:, 0],
             n_values=(4, 8), n_seeds=1, t1=0.1, n_saves=2, m_grid=64, dt=0.05), {}),
}
ALL_CASES = {**CASES, **EXTRA}


def _generated(name) -> list:
    """(parameter, invalid value, relation-breaking arguments) from the declaration of one callable."""
    decl = declaration(ALL_CASES[name][0])
    if decl is None:
        return []
    out = [(param, bad, None) for param, constraint in decl.constraints.items() for bad in constraint.invalid()]
    return out + [(rel.names[0], None, brk) for rel in decl.relations for brk in rel.breaks]


def _tagged(name, generated) -> list:
    """(argument, invalid value) of the tags of one callable that the generation does not produce."""
    fn, _, tags = ALL_CASES[name]
    done = {(param, _key(bad)) for param, bad, brk in generated if brk is None}
    out = []
    for arg, tag in tags.items():
        param = inspect.signature(fn).parameters.get(arg)
        for bad in BAD[tag]:
            if bad is None and param is not None and param.default is None:
                continue  # None is the documented default
            if (arg, _key(bad)) not in done:
                out.append((arg, bad))
    return out


def _key(value) -> str:
    return f"{type(value).__name__}:{value!r}"


def test_enough_inputs():
    # the declared surfaces alone derive this many invalid inputs; the number grows with every declaration
    generated = {name: _generated(name) for name in ALL_CASES}
    assert sum(map(len, generated.values())) >= 2000
    assert sum(len(_tagged(name, generated[name])) for name in ALL_CASES) >= 1000


def _refusal(fn, call, errors=LIBRARY_ERRORS) -> str:
    """The refusal of fn(**call) by one of ``errors`` (its message), or a failure saying what happened instead."""
    try:
        out = fn(**call)
    except errors as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - the point of the suite
        raise AssertionError(f"obscure failure: {type(exc).__name__}: {str(exc)[:200]}") from None
    raise AssertionError(f"silent: returned {type(out).__name__} instead of raising")


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_every_bad_input_is_refused(name):
    """The generated inputs of one callable (refused at the call by InvalidParameterError naming the
    parameter) and its tagged ones (refused by a library error); all are run, then the misses reported."""
    fn, kwargs, _ = ALL_CASES[name]
    generated = _generated(name)
    cases = [(param, bad, brk, True) for param, bad, brk in generated]
    cases += [(arg, bad, None, False) for arg, bad in _tagged(name, generated)]
    failures = []
    for param, bad, brk, named in cases:
        what = f"{param}={'breaks ' + str(sorted(brk)) if brk is not None else _key(bad)[:60]}"
        try:
            call = dict(kwargs, **(brk if brk is not None else {param: bad}))
            message = _refusal(fn, call, InvalidParameterError if named else LIBRARY_ERRORS)
        except AssertionError as exc:
            failures.append(f"{what}: {exc}")
            continue
        if named and not any(f"{q}{param}{end}" in message for q in "'\"" for end in ("'", "[")):
            failures.append(f"{what}: the message does not name {param!r}: {message[:200]}")
        if garbled(message, param):
            failures.append(f"{what}: {garbled(message, param)}: {message[:200]}")
    assert not failures, "\n".join(failures)


def test_no_new_public_callable_without_a_declaration():
    undeclared = {name for name, (fn, _, _) in CASES.items() if declaration(fn) is None}
    assert undeclared <= UNDECLARED, f"declare these new public callables: {sorted(undeclared - UNDECLARED)}"
    assert not UNDECLARED - undeclared, f"declared since: remove from UNDECLARED {sorted(UNDECLARED - undeclared)}"
    # the declared ones are declared for every parameter they name, and only for parameters that exist
    for name, (fn, _, _) in ALL_CASES.items():
        params = inspect.signature(fn).parameters
        if declaration(fn) is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            assert set(declaration(fn).constraints) <= set(params), name


def test_signature_arguments_exist():
    # a tag on a misspelt argument would test nothing
    for name, (fn, _, tags) in CASES.items():
        params = inspect.signature(fn).parameters
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            continue
        assert set(tags) <= set(params), (name, set(tags) - set(params))
