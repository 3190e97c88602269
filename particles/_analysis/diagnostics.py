r"""Diagnostics of a multi-head state, computed from one pass per head.

:func:`diagnose` returns, for a state ``x`` of a :class:`~particles.MultiHead` model:

- ``energy`` (H,) and ``log_energy`` (H,): :math:`E_h` and :math:`\log E_h` (docs/theory.md §2);
  ``energy_multi``: :math:`\sum_h E_h`;
- ``energy_rate``: the exact :math:`dE_{multi}/dt = \sum_i\langle\nabla_{x_i}E, \dot x_i\rangle`,
  ``head_energy_rate`` (H,): the same per head;
- ``kinetic``: the Theorem 11 rate :math:`\frac1n\sum_i\|\dot x_i\|^2`, and
  ``rate_residual`` = ``energy_rate - kinetic`` (zero under C3 + C4 for USA heads);
- ``radial_shadow`` (H, n): :math:`a^h_i = \langle f^h_i, x_i\rangle`; ``cos_angle`` (H, n):
  :math:`\cos\angle(f^h_i, x_i)`;
- ``rd_margin`` (H, n): :math:`m^h_i = \|P f^h_i\|^2 - \|f^h_i\|\sum_{k\ne h}|a^k_i|` and
  ``rd_margin_min`` (H,): its minimum over tokens (Condition 8 holds iff all are >= 0);
- ``entropy`` (H, n): softmax attention entropy :math:`H^h_i`;
- ``summation_bound`` (H,): the bound on the relative error of every partition function
  :math:`Z_i` of each head (0 where the sums were exact), and ``summation_fast`` (H,): 1
  where the head took a fast route of :mod:`particles.summation`, else 0. Every other
  diagnostic comes from the same sums, so it carries the same bound: energies and log-USA
  weights to relative ``summation_bound``, softmax means to ``2 * summation_bound``.

Infinite values are documented, never NaN: ``energy`` and ``energy_multi`` are +inf when
:math:`E_h` is past the float64 range (``log_energy`` stays finite for every β > 0; at β = 0
``log_energy`` is +inf and ``energy`` the finite part of :meth:`~particles.MultiHead.head_energies`);
``energy_rate``, ``head_energy_rate`` and so ``rate_residual`` are ±inf only when the rate itself
is past the float64 range (they are summed in the log domain, so there is no inf − inf). Every
other diagnostic is finite.

Rates and shadows of USA models are in the units scaled by :math:`e^{-c}` of
``model.log_time_scale`` (identity when c = 0). :func:`diagnostics_fn` wraps
:func:`diagnose` as a ``save_fn(t, x)`` for :class:`~particles.SaveAt`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._core.declarations import declare
from .._core.params import NONE, AnyOf, Options, SequenceOf
from .._core.validation import check_instance, check_names
from .._model.checks import Model, fits_model
from .._model.energies import _signed_logsumexp
from .._model.fields import STATE
from .._model.kinds import safe_exp as _safe_exp
from .._model.multihead import MultiHead
from .shadows import radial_parts

__all__ = ["diagnose", "diagnostics_fn", "DIAGNOSTICS"]

#: names, long names, units and trailing dims of every diagnostic
DIAGNOSTICS = {
    "energy": ("head energy E_h", "1", ("head",)),
    "log_energy": ("log of head energy E_h", "1", ("head",)),
    "energy_multi": ("total energy E_multi", "1", ()),
    "energy_rate": ("exact dE_multi/dt", "1", ()),
    "head_energy_rate": ("exact dE_h/dt", "1", ("head",)),
    "kinetic": ("Theorem 11 rate (1/n) sum_i |dx_i/dt|^2", "1", ()),
    "rate_residual": ("dE_multi/dt minus Theorem 11 rate", "1", ()),
    "radial_shadow": ("radial shadow a_i^h = <f_i^h, x_i>", "1", ("head", "particle")),
    "cos_angle": ("cosine between head output and token", "1", ("head", "particle")),
    "rd_margin": ("radial-dominance margin m_i^h", "1", ("head", "particle")),
    "rd_margin_min": ("minimum over tokens of the radial-dominance margin", "1", ("head",)),
    "entropy": ("softmax attention entropy H_i^h (nats)", "1", ("head", "particle")),
    "summation_bound": ("bound on the relative error of the partition functions Z_i", "1", ("head",)),
    "summation_fast": ("head evaluated by fast summation (1) or exactly (0)", "1", ("head",)),
}


#: a selection of diagnostics by name
_INCLUDE = AnyOf(NONE, SequenceOf(Options(*DIAGNOSTICS)))


@declare(model=Model(), x=STATE, include=_INCLUDE, relations=[fits_model()])
def diagnose(model: MultiHead, x, *, include=None) -> dict:
    """All diagnostics of the module docstring at state ``x`` (shape (n, d)).

    Parameters
    ----------
    model : MultiHead
    x : ndarray of shape (n, d), unit rows on the sphere geometry
    include : iterable of str, optional
        Subset of :data:`DIAGNOSTICS` to return (all by default).

    Returns
    -------
    dict of str to float or ndarray
    """
    include = _check_diagnose_args(model, include, "diagnose")
    x = model.check_x(x)
    n = x.shape[0]
    H = model.n_heads
    exp_passes = model.energy_sums(x, check=False)
    if model.variant:
        # causal masks and LN variants: the true field, so that the rates say how far it is
        # from the gradient flow (rate_residual != 0)
        f = model.outputs(x, check=False)
        xdot = model(0.0, x)
    else:
        f = model.outputs(x, exp_passes if model.attention.shares_energy_sums else None, check=False)
        v = f.sum(axis=0) * model.velocity_scale(n)
        xdot = model.geom.project_tangent(x, v)
    out: dict = {}
    if model.beta > 0:
        logE = np.array([logsumexp(p.logz) for p in exp_passes]) - np.log(2 * model.beta * n * n)
        out["log_energy"] = logE
        out["energy"] = _safe_exp(logE)
    else:
        out["log_energy"] = np.full(H, np.inf)
        out["energy"] = model.head_energies(x)
    out["energy_multi"] = float(out["energy"].sum())
    out["head_energy_rate"], out["energy_rate"] = _energy_rates(model, x, exp_passes, xdot)
    out["kinetic"] = float(np.sum(xdot * xdot) / n)
    out["rate_residual"] = out["energy_rate"] - out["kinetic"]
    r = radial_parts(f, x)
    fnorm = np.sqrt(r.norm2)
    out["radial_shadow"] = r.shadow
    with np.errstate(invalid="ignore", divide="ignore"):
        # a head with zero output has no direction: report cos = 0 on purpose
        out["cos_angle"] = np.where(fnorm > 0, r.shadow / np.where(fnorm > 0, fnorm, 1.0), 0.0)
    out["rd_margin"] = r.margin
    out["rd_margin_min"] = r.margin.min(axis=1)
    out["entropy"] = model.entropy(x, exp_passes, clip=True)
    out["summation_bound"] = np.array([p.bound for p in exp_passes])
    out["summation_fast"] = np.array([float(p.method != "exact") for p in exp_passes])
    if include is not None:
        out = {k: out[k] for k in include}
    return out


def _energy_rates(model: MultiHead, x: np.ndarray, sums, xdot: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Exact :math:`dE_h/dt` per head and their total, summed in the log domain.

    :math:`dE_h/dt = \sum_i\langle\nabla_{x_i}E_h,\dot x_i\rangle` with
    :math:`\nabla_{x_i}E_h = \frac{1}{2n^2}[Z_i M_h\bar x_i + Z'_i M_h^\top\bar x'_i]` (times
    :math:`e^{-c}`). At large β the partition functions :math:`Z_i = e^{\log Z_i}` overflow while the
    rate may not; each term is kept as :math:`(\log Z_i - c,\ \langle M_h\bar x_i, \dot x_i\rangle)` and
    the signed sum is one signed log-sum-exp, so a rate is ±inf only when
    its magnitude is past the float64 range, never NaN (no inf − inf). On the sphere the gradient
    is projected before the product: :math:`\dot x_i` is tangent, so this changes nothing in exact
    arithmetic but removes the round-off of a large radial component.
    """
    n = x.shape[0]
    H = model.n_heads
    tangent = model.geom.on_sphere and model.update != "post_ln"  # post_ln's field is not projected
    sums_t = None if model.symmetric else model.energy_sums(x, transpose=True, check=False)
    logs, coefs = [], []
    for h in range(H):
        halves = [(sums[h], model.M[h].T)] if sums_t is None else [(sums[h], model.M[h].T), (sums_t[h], model.M[h])]
        for p, Mt in halves:
            g = p.mean @ Mt
            if tangent:
                g = model.geom.project_tangent(x, g)
            logs.append(p.logz - model.log_time_scale)
            coefs.append(np.einsum("id,id->i", g, xdot) / (len(halves) * n * n))
    per = len(logs) // H
    a = np.stack(logs).reshape(H, per * n)
    b = np.stack(coefs).reshape(H, per * n)
    # an exact zero rate (e.g. a stationary state) has log |rate| = -inf and sign 0: the product is 0
    log_head, sign_head = _signed_logsumexp(a, b, axis=1)
    log_tot, sign_tot = _signed_logsumexp(a.ravel(), b.ravel(), axis=0)
    return sign_head * _safe_exp(log_head), float(sign_tot * _safe_exp(log_tot))


@declare(model=Model(), include=_INCLUDE)
def diagnostics_fn(model: MultiHead, include=None):
    """A ``save_fn(t, x) -> dict`` computing :func:`diagnose` (for ``SaveAt(fn=...)``)."""

    include = _check_diagnose_args(model, include, "diagnostics_fn")

    def save_fn(t, x):
        return diagnose(model, x, include=include)

    return save_fn


def _check_diagnose_args(model, include, caller):
    check_instance(model, MultiHead, "model", caller, hint="Build one with particles.MultiHead(M, W, beta=...).")
    return None if include is None else check_names(include, "include", DIAGNOSTICS, caller)
