"""Bad input raises clear errors naming the argument and the fix."""

import numpy as np
import pytest

import particles
from particles import InvalidParameterError, MultiHead, SaveAt, sample_uniform, simulate
from particles import theory as th


@pytest.fixture
def model():
    return MultiHead(np.eye(3), beta=1.0, kind="softmax")


@pytest.mark.parametrize(
    "x, match",
    [
        (np.ones(5), r"'x' parameter of MultiHead.velocity must have shape \(n, d\).*got shape \(5,\)"),
        (np.ones((4, 3)), r"must lie on the unit sphere \(max \|‖x_i‖ − 1\| = 7.3e-01 > atol=1e-10\); use x / "
                          r"np.linalg.norm"),
        (np.array([[np.nan, 0, 0]]), r"must be finite; got 1 NaN and 0 inf"),
        (np.array([[np.inf, 0, 0]]), r"got 0 NaN and 1 inf"),
        (np.eye(4), r"x has d = 4 columns but the heads are 3 x 3"),
        ("abc", r"'x' parameter of MultiHead.velocity must be an array of shape"),
        (np.array([["a", "b"]]), r"must hold real numbers"),
    ],
)
def test_bad_points(model, x, match):
    with pytest.raises(InvalidParameterError, match=match):
        model.velocity(x)


def test_error_is_value_and_type_error():
    assert issubclass(InvalidParameterError, ValueError) and issubclass(InvalidParameterError, TypeError)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(beta=-1.0),
         r"The 'beta' parameter of MultiHead must be a real number in \[0, inf\); got -1.0 \(float\)."),
        (dict(beta=np.nan), r"'beta' parameter"),
        (dict(beta="1"), r"'beta' parameter"),
        (dict(kind="gelu"), r"The 'kind' parameter of MultiHead must be one of 'usa', 'softmax', 'relu', "
                            r"'relu_rownorm', 'sigmoid', 'sinkhorn'; got 'gelu'"),
        (dict(geometry="torus"), r"'geometry' parameter of MultiHead must be one of 'sphere', 'flat'"),
        (dict(log_time_scale="big"), r"'log_time_scale' parameter of MultiHead must be a real number in \(-inf, "
                                     r"inf\) or one of 'auto'"),
        (dict(W=np.eye(4)), r"'W' parameter of MultiHead: must hold one value matrix per head, of the shape of M"),
        (dict(W=np.stack([np.eye(3)] * 2)), r"one value matrix per head"),
    ],
)
def test_bad_model_parameters(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        MultiHead(kwargs.pop("M", np.eye(3)), **kwargs)


@pytest.mark.parametrize(
    "M, match",
    [
        (np.ones((3, 4)), r"'M' parameter of MultiHead must have shape \(d, d\) or \(H, d, d\); got shape \(3, 4\)"),
        (np.array([[np.nan, 0], [0, 1]]), r"'M' parameter of MultiHead must be finite"),
        (None, r"'M' parameter of MultiHead must be an array"),
    ],
)
def test_bad_matrices(M, match):
    with pytest.raises(InvalidParameterError, match=match):
        MultiHead(M)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="rk5", dt=0.1), r"'method' parameter of simulate must be one of 'euler', .*'euler_maruyama' or "
                                     r"a Stepper; got 'rk5'"),
        (dict(method="rk4"), r"'dt' parameter of simulate: must be given for a fixed-step method"),
        (dict(dt=-0.1), r"'dt' parameter of simulate must be None or a real number in \(0, inf\)"),
        (dict(dt=0.1, kappa=1.0), r"'kappa' parameter of simulate: must be inf unless method='euler_maruyama'"),
        (dict(dt=0.1, t0=2.0), r"'t1' parameter of simulate: must be greater than t0"),
        (dict(dt=0.1, on_failure="ignore"), r"'on_failure' parameter"),
        (dict(dt=0.1, save=SaveAt(ts=[0.5, 3.0])), r"SaveAt.ts must lie in \[t0, t1\]"),
        (dict(dt=0.1, geometry="flat"), r"conflicts with the field's geometry 'sphere'"),
    ],
)
def test_bad_simulate_arguments(model, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        simulate(sample_uniform(3, d=3, rng=0), model, t1=1.0, **kwargs)


def test_bad_field():
    with pytest.raises(InvalidParameterError, match="'field' parameter of simulate must be a vector field: a "
                                                    "MultiHead, an Ensemble or a callable"):
        simulate(sample_uniform(3, d=3, rng=0), 3.0, t1=1.0, dt=0.1)


def test_bad_theory_arguments():
    with pytest.raises(InvalidParameterError, match=r"'rho' parameter of equiangular_tokens"):
        th.equiangular_tokens(4, -0.5)
    with pytest.raises(InvalidParameterError, match=r"'d' parameter of equiangular_tokens"):
        th.equiangular_tokens(4, 0.1, d=3)
    with pytest.raises(InvalidParameterError, match="log_head_energies needs beta > 0"):
        MultiHead(np.eye(3), beta=0.0).log_head_energies(np.eye(3))


@pytest.mark.parametrize("value", [10**20, -(10**20), 2**63, 1e20, np.float64(-1e19)])
def test_an_integer_beyond_int64_is_refused_as_too_large(value):
    """An integer parameter of the API (and of a config, the same constraint) beyond int64 is refused saying
    it is too large, with the limit; 2^63 - 1 itself is an integer like any other."""
    from particles.validation import NONE, AnyOf, Integer

    for rule in (Integer(None), AnyOf(NONE, Integer(None))):
        with pytest.raises(InvalidParameterError, match=r"It is too large: integers are limited to int64, at most "
                                                        r"2\^63 - 1 = 9223372036854775807 in size\.$"):
            rule.check(value, "n", "f")
    assert Integer(1).check(2**63 - 1, "n", "f") == 2**63 - 1
    with pytest.raises(InvalidParameterError, match=r"must be an integer in \[1, inf\); got 0 \(int\)\.$"):
        Integer(1).check(0, "n", "f")  # (a value merely out of range keeps its message)
    with pytest.raises(InvalidParameterError, match=r"The 'n_heads' parameter of load_attention .* too large"):
        particles.load_attention({"h.0.attn.c_attn.weight": np.ones((2, 6)), "h.0.attn.c_proj.weight": np.eye(2)},
                                 n_heads=10**20)


def test_a_grid_value_refused_without_a_fix_ends_with_one_full_stop():
    """'got 0 (int)..': the grid's own full stop and the check's were both written."""
    import metrics

    with pytest.raises(InvalidParameterError) as info:
        metrics.run_sweep({"n_particles": [0]}, n_seeds=1, t1=0.1, dt=0.05, n_saves=2)
    assert "got 0 (int)." in str(info.value) and ".." not in str(info.value)
