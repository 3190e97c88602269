"""Bad input that only shows in combination: arrays whose shapes must agree, and values valid
alone but not together; plus the large-β corner of every numeric diagnostic.

``COMBINATIONS`` lists, for each public callable taking several array arguments, calls in which
one pair of them disagrees; each must raise the library's own error naming one of the pair
(:data:`particles.validation.LIBRARY_ERRORS`), never return and never leak a numpy exception.
``test_every_multi_array_callable_has_combination_cases`` fails when a public callable of an
``__all__`` takes two or more array arguments and has no entry here.
"""

import numpy as np
import pytest

import particles
from particles.validation import LIBRARY_ERRORS

X = particles.sample_uniform(5, 3, 0)
EYE2 = np.stack([np.eye(3)] * 2)
EYE3 = np.stack([np.eye(3)] * 3)


def _raises_naming(fn, kwargs, names):
    """fn(**kwargs) must raise a library error whose message names one of ``names``."""
    try:
        out = fn(**kwargs)
    except LIBRARY_ERRORS as exc:
        msg = str(exc)
        assert any(n in msg for n in names), f"the message does not name {names}: {msg}"
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
    x = np.stack([particles.sample_uniform(6, 3, s) for s in range(2)])
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
    x = particles.sample_uniform(20, 3, 1)
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
    out = particles.diagnose(model, particles.sample_uniform(20, 3, 1))
    assert out["energy_rate"] == pytest.approx(out["kinetic"], rel=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_log_domain_rates_equal_the_gradient_rates_where_finite(kind):
    # at moderate beta the stable sum is the plain one: Σ_i <∇_i E_h, ẋ_i>
    model = _model(kind, 2.0, symmetric=False)
    x = particles.sample_uniform(15, 3, 2)
    out = particles.diagnose(model, x)
    xdot = model.velocity(x)
    grads = model._head_gradients(x, model._exp_sums(x))
    np.testing.assert_allclose(out["head_energy_rate"], np.einsum("hid,id->h", grads, xdot), rtol=1e-10, atol=1e-14)
