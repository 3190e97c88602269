"""Model variants as options of the one field: causal masking, pre-/post-LN, nGPT update,
time-dependent weights and stacks of layers, each checked on a known property."""

import numpy as np
import pytest

from particles import (
    MultiHead,
    SaveAt,
    TimeDependent,
    diagnose,
    normalize,
    project_tangent,
    sample_uniform,
    simulate,
    simulate_layers,
)
from tests.helpers import random_symmetric


def test_causal_weights_and_dense_reference(rng):
    M = random_symmetric(rng, 2, 3)
    W = rng.standard_normal((2, 3, 3))
    model = MultiHead(M, W, beta=1.3, kind="softmax", causal=True)
    x = sample_uniform(6, d=3, rng=rng)
    w = model.weights(x)
    assert np.all(np.triu(w, 1) == 0) and np.allclose(w.sum(-1), 1.0)
    s = 1.3 * np.einsum("id,hde,je->hij", x, M, x)
    mask = np.tril(np.ones((6, 6), dtype=bool))
    p = np.where(mask, np.exp(s), 0.0)
    p /= p.sum(-1, keepdims=True)
    v = np.einsum("hij,jd,hed->ie", p, x, W)
    np.testing.assert_allclose(model.velocity(x), project_tangent(x, v), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["usa", "softmax", "relu"])
def test_causal_prefix_property(rng, kind):
    """Token k depends only on tokens j <= k: perturbing the last token leaves the others' paths unchanged."""
    model = MultiHead(random_symmetric(rng, 2, 3), rng.standard_normal((2, 3, 3)), beta=1.0, kind=kind, causal=True)
    x0 = sample_uniform(7, d=3, rng=rng)
    y0 = x0.copy()
    y0[-1] = sample_uniform(1, d=3, rng=rng)[0]
    a = simulate(x0, model, t1=1.0, dt=0.01).x[-1]
    b = simulate(y0, model, t1=1.0, dt=0.01).x[-1]
    np.testing.assert_array_equal(a[:-1], b[:-1])
    assert np.abs(a[-1] - b[-1]).max() > 1e-3


def test_causal_first_token_alone_and_fixed(rng):
    model = MultiHead(random_symmetric(rng, 1, 3), rng.standard_normal((1, 3, 3)), beta=0.7, kind="softmax",
                      causal=True)
    x0 = sample_uniform(5, d=3, rng=rng)
    many = simulate(x0, model, t1=1.0, dt=0.01).x[-1]
    alone = simulate(x0[:1], model, t1=1.0, dt=0.01).x[-1]
    np.testing.assert_allclose(many[0], alone[0], atol=1e-14)  # it only sees itself
    scalar = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, causal=True)
    assert np.abs(scalar.velocity(x0)[0]).max() < 1e-15  # W x_1 ∥ x_1: the first token is fixed


def test_causal_loses_the_gradient_flow(rng):
    M = random_symmetric(rng, 2, 3)
    x = sample_uniform(8, d=3, rng=rng)
    full = diagnose(MultiHead(M, beta=1.0), x)
    masked_model = MultiHead(M, beta=1.0, causal=True)
    masked = diagnose(masked_model, x)
    assert MultiHead(M, beta=1.0).gradient_flow and not masked_model.gradient_flow
    assert abs(full["rate_residual"]) < 1e-12 * full["kinetic"]
    assert abs(masked["rate_residual"]) > 1e-2 * masked["kinetic"]  # Theorem 11 fails by O(1)
    # the exact rate is still dE/dt along the masked flow
    xdot = masked_model.velocity(x)
    assert masked["energy_rate"] == pytest.approx(np.sum(masked_model.energy_gradient(x) * xdot), rel=1e-12)


def test_pre_ln_reads_directions_only(rng):
    M = random_symmetric(rng, 2, 4)
    model = MultiHead(M, beta=1.0, kind="softmax", geometry="flat", update="pre_ln")
    x = sample_uniform(6, d=4, rng=rng)
    scaled = x * rng.uniform(0.5, 3.0, size=(6, 1))
    np.testing.assert_allclose(model.velocity(scaled), model.velocity(x), rtol=1e-12)
    np.testing.assert_allclose(model.velocity(x), MultiHead(M, beta=1.0, kind="softmax", geometry="flat").velocity(x),
                               rtol=1e-12)
    traj = simulate(x, model, t1=1.0, dt=0.01)
    assert np.abs(np.linalg.norm(traj.x[-1], axis=1) - 1).max() > 1e-2  # the stream is not normalised


def test_post_ln_euler_is_the_layer_and_converges_to_the_sphere_flow(rng):
    M = random_symmetric(rng, 2, 3)
    post = MultiHead(M, beta=1.0, kind="softmax", update="post_ln")
    sphere = MultiHead(M, beta=1.0, kind="softmax")
    x0 = sample_uniform(6, d=3, rng=rng)
    v = np.einsum("hij,jd,hed->ie", post.weights(x0), x0, post.W)
    one = simulate(x0, post, t1=0.1, dt=0.1, method="euler").x[-1]
    np.testing.assert_allclose(one, normalize(x0 + 0.1 * v), atol=1e-15)  # x ← LN(x + dt Attn(x))
    exact = simulate(x0, sphere, t1=1.0, dt=5e-3).x[-1]
    errs = [np.abs(simulate(x0, post, t1=1.0, dt=h, method="euler").x[-1] - exact).max() for h in (0.02, 0.01)]
    assert errs[0] / errs[1] == pytest.approx(2.0, rel=0.15)  # first order in dt


def test_ngpt_normalised_update(rng):
    M = random_symmetric(rng, 2, 3)
    W = rng.standard_normal((2, 3, 3))
    ngpt = MultiHead(M, W, beta=1.0, kind="softmax", update="ngpt")
    std = MultiHead(M, W, beta=1.0, kind="softmax")
    x = sample_uniform(7, d=3, rng=rng)
    v = np.einsum("hij,jd,hed->ie", std.weights(x), x, W)
    vn = np.linalg.norm(v, axis=1)
    cos = np.einsum("id,id->i", v, x) / vn
    speed = np.linalg.norm(ngpt.velocity(x), axis=1)
    np.testing.assert_allclose(speed, np.sqrt(1 - cos**2), rtol=1e-12)  # |x'| = sin∠(v, x) <= 1
    np.testing.assert_allclose(ngpt.velocity(x), std.velocity(x) / vn[:, None], rtol=1e-12)
    np.testing.assert_allclose(MultiHead(M, 3.0 * W, beta=1.0, kind="softmax", update="ngpt").velocity(x),
                               ngpt.velocity(x), rtol=1e-12)  # invariant under W -> cW


def test_time_dependent_weights_are_a_time_change(rng):
    """Softmax heads with W(t) = (1 + t) W: the run at t is the constant run at τ = t + t²/2."""
    M = random_symmetric(rng, 2, 3)
    template = MultiHead(M, beta=1.0, kind="softmax")
    field = TimeDependent(lambda t: (M, (1.0 + t) * M), template)
    x0 = sample_uniform(6, d=3, rng=rng)
    varying = simulate(x0, field, t1=1.0, dt=1e-2, geometry=field.geometry).x[-1]
    constant = simulate(x0, template, t1=1.5, dt=1e-2).x[-1]
    np.testing.assert_allclose(varying, constant, atol=1e-8)  # RK4 at dt = 0.01 on both


def test_stack_of_identical_layers_is_one_run(rng):
    model = MultiHead(random_symmetric(rng, 2, 3), beta=1.0, kind="softmax")
    x0 = sample_uniform(6, d=3, rng=rng)
    stack = simulate_layers(x0, [model] * 3, layer_time=0.5, dt=0.05, n_saves_per_layer=2)
    assert stack.x.shape == (7, 6, 3) and np.allclose(stack.t, np.linspace(0, 1.5, 7))
    one = simulate(x0, model, t1=1.5, dt=0.05, save=SaveAt(ts=np.linspace(0, 1.5, 7)))
    np.testing.assert_allclose(stack.x, one.x, atol=1e-13)
    other = MultiHead(-model.M, beta=1.0, kind="softmax")
    two = simulate_layers(x0, [model, other], layer_time=0.5, dt=0.05)
    first = simulate(x0, model, t1=0.5, dt=0.05).x[-1]
    np.testing.assert_allclose(two.x[-1], simulate(first, other, t1=0.5, dt=0.05).x[-1], atol=1e-14)


def test_bad_input(rng):
    M = random_symmetric(rng, 1, 3)
    with pytest.raises(ValueError, match="'update' parameter of MultiHead: needs its geometry .'pre_ln' needs "
                                         "geometry='flat'"):
        MultiHead(M, update="pre_ln")
    with pytest.raises(ValueError, match="'update' parameter of MultiHead: needs its geometry.*got update = 'ngpt'"):
        MultiHead(M, update="ngpt", geometry="flat")
    with pytest.raises(ValueError, match="'update' parameter of MultiHead must be one of"):
        MultiHead(M, update="rmsnorm")
    with pytest.raises(ValueError, match="'causal' parameter of MultiHead must be True or False"):
        MultiHead(M, causal="yes")
    with pytest.raises(ValueError, match="'causal' parameter of MultiHead: True is exact-only"):
        MultiHead(M, causal=True, summation="fast")
    with pytest.raises(ValueError, match="'weights_fn' parameter of TimeDependent must be a callable"):
        TimeDependent(M, MultiHead(M))
    with pytest.raises(ValueError, match="weights_fn of TimeDependent must return a pair"):
        TimeDependent(lambda t: M, MultiHead(M))(0.0, np.eye(3))
    # matrices that go bad later in the run: the message names the callable and the time, not MultiHead.replace
    late_nan = TimeDependent(lambda t: (M * (np.nan if t > 0 else 1.0), M), MultiHead(M))
    late_nan(0.0, np.eye(3))
    with pytest.raises(ValueError, match=r"^M = weights_fn\(0.25\)\[0\] of TimeDependent must be finite; got 9 NaN"):
        late_nan(0.25, np.eye(3))
    late_w = TimeDependent(lambda t: (M, M if t < 1 else np.ones((2, 3, 3))), MultiHead(M))
    with pytest.raises(ValueError, match=r"^weights_fn of TimeDependent returned unusable matrices at t=1: .*'W'"):
        late_w(1.0, np.eye(3))
    with pytest.raises(ValueError, match="layers of simulate_layers must share d and geometry"):
        simulate_layers(np.eye(3), [MultiHead(M), MultiHead(np.eye(2))], dt=0.1)
