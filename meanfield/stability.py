r"""Linear stability of the uniform measure on S^1 under noise (scalar heads).

Around :math:`\rho_0 = 1/(2\pi)`, a mode :math:`\varepsilon\cos k\theta` of the noisy mean-field
equation :math:`\partial_t\rho + \partial_\theta(\rho v[\rho]) = \kappa^{-1}\partial_\theta^2\rho`
with one scalar head (M = λI, W = μI, a = βλ) grows at the rate

.. math:: \sigma_k = k^2\Big(\frac{\mu\, I_k(a)}{a\, Z_0} - \frac1\kappa\Big),
   \qquad Z_0 = 1 \text{ (USA)},\quad Z_0 = I_0(a) \text{ (softmax)},

using :math:`\int_0^{2\pi} e^{a\cos\psi}\sin\psi\sin k\psi\,d\psi = 2\pi k I_k(a)/a`. Mode 1
is the most unstable, so the uniform state is stable iff
:math:`\kappa < \kappa^* = a Z_0 / (\mu I_1(a))` — small coupling keeps it, large coupling clusters.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ive

from particles.validation import InvalidParameterError, check_choice, check_param

__all__ = ["uniform_growth_rate", "critical_kappa"]


def _ratio(k, a, kind):
    """μ-free factor I_k(a)/(a Z_0), overflow-free through the scaled Bessel ive."""
    if a == 0:
        return 0.5 if k == 1 else 0.0  # I_1(a)/a → 1/2
    if kind == "softmax":
        return ive(k, a) / (a * ive(0, a))
    return ive(k, a) * np.exp(abs(a)) / a


def uniform_growth_rate(beta, lam, mu=None, *, kind="usa", kappa=np.inf, k=1) -> float:
    r"""Growth rate :math:`\sigma_k` of mode k around the uniform measure (module docstring)."""
    beta = check_param(beta, "beta", "uniform_growth_rate", low=0.0)
    check_choice(kind, "kind", ("usa", "softmax"), "uniform_growth_rate")
    kappa = check_param(kappa, "kappa", "uniform_growth_rate", low=0.0, low_open=True, allow_inf=True)
    lam = check_param(lam, "lam", "uniform_growth_rate")
    mu = lam if mu is None else check_param(mu, "mu", "uniform_growth_rate")
    k = check_param(k, "k", "uniform_growth_rate", low=1, integer=True)
    a = beta * lam
    return float(k * k * (mu * _ratio(k, a, kind) - 1.0 / kappa))


def critical_kappa(beta, lam, mu=None, *, kind="usa") -> float:
    r""":math:`\kappa^* = a Z_0/(\mu I_1(a))`: the uniform measure is linearly stable iff κ < κ*."""
    caller = "critical_kappa"
    beta = check_param(beta, "beta", caller, low=0.0)
    lam = check_param(lam, "lam", caller)
    mu = lam if mu is None else check_param(mu, "mu", caller)
    check_choice(kind, "kind", ("usa", "softmax"), caller)
    rate = mu * _ratio(1, beta * lam, kind)
    if not rate > 0:
        raise InvalidParameterError(
            f"critical_kappa needs an attracting head (mu I_1(a)/(a Z_0) > 0); got {rate:g}: the uniform state "
            "is then stable for every kappa."
        )
    return float(1.0 / rate)
