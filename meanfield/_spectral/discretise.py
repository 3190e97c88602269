"""Reading a measure into the spectral scheme: which discretisation (S^1 Fourier, S^2 spherical
harmonics, zonal Gegenbauer) a measure and a model call for, the largest band limit the data
resolves, and the initial coefficients at any band limit."""

from __future__ import annotations

import numpy as np

from particles.extend import scalar_heads
from particles.validation import (
    InvalidParameterError,
)

from .circle import _Circle, _circle_coefficients
from .sht import sphere_harmonic_transform
from .sphere import AXIAL_ROUNDOFF, _Sphere
from .zonal import ZonalMeasure, _gauss_gegenbauer, _gegenbauer_orthonormal, _Zonal

__all__ = ["discretisation"]


def discretisation(mu0, model):
    """(geometry, d, the largest band limit the data resolves, L -> discretisation, L -> initial
    coefficients) of a measure the spectral scheme accepts, or a clear refusal."""
    from ..measure import GridMeasure

    if isinstance(mu0, ZonalMeasure):
        return _zonal_discretisation(mu0, model)
    if isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 2:
        return _circle_discretisation(mu0, model)
    if isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 3:
        return _sphere_discretisation(mu0, model)
    if isinstance(mu0, GridMeasure):
        raise InvalidParameterError(
            f"scheme 'spectral' on S^{mu0.points.shape[1] - 1} needs zonal data: pass a "
            "meanfield.ZonalMeasure (density a function of <x, e>) with scalar heads; GridMeasures are "
            "read on S^1 and S^2 only."
        )
    raise InvalidParameterError(
        "scheme 'spectral' needs a GridMeasure (uniform S^1 grid or sphere_quadrature(3, n=n) on S^2) or a "
        f"ZonalMeasure; got {type(mu0).__name__}."
    )


def _zonal_discretisation(mu0, model):
    """:func:`discretisation` of a ZonalMeasure: Gegenbauer coefficients by Gauss–Gegenbauer quadrature."""
    if mu0.d != model.d:
        raise InvalidParameterError(f"the ZonalMeasure lives on S^{mu0.d - 1} but the model has d = {model.d}.")
    if scalar_heads(model.M, model.W) is None:
        raise InvalidParameterError(
            "scheme 'spectral' with a ZonalMeasure needs scalar heads M_h = lambda_h I, W_h = mu_h I "
            "(only these keep a zonal density zonal); build the model with MultiHead.scalar."
        )
    d = mu0.d

    def initial(L_):
        n = max(2 * L_ + 2, 64)
        t, w = _gauss_gegenbauer(n, d)
        rho = mu0.profile(t)
        Q = _gegenbauer_orthonormal(L_, t, d)
        c = (Q * w[:, None]).T @ rho
        if not c[0] > 0:
            raise InvalidParameterError(
                "density_fn of the ZonalMeasure integrates to zero on the Gauss-Gegenbauer nodes: pass a "
                "density with positive mass (e.g. lambda x: 1 + 0.5 * x[:, -1])."
            )
        return c / c[0]

    return "zonal", d, 4096, lambda L_: _Zonal(model, L_, d), initial


def _circle_discretisation(mu0, model):
    """:func:`discretisation` of a GridMeasure on S^1: its Fourier coefficients."""
    if model.d != 2:
        raise InvalidParameterError(f"the GridMeasure lives on S^1 but the model has d = {model.d}.")
    full = _circle_coefficients(mu0, 10**9)
    L_max = len(full) - 1

    def initial(L_):
        c = np.zeros(L_ + 1, complex)
        c[: min(L_, L_max) + 1] = full[: L_ + 1]
        return c

    return "circle", 2, L_max, lambda L_: _Circle(model, L_), initial


def _sphere_discretisation(mu0, model):
    """:func:`discretisation` of a GridMeasure on the Gauss–Legendre grid of S^2: its spherical
    harmonic coefficients."""
    from ..quadrature import sphere_quadrature

    if model.d != 3:
        raise InvalidParameterError(f"the GridMeasure lives on S^2 but the model has d = {model.d}.")
    nlat = int(round(np.sqrt(len(mu0.points) / 2)))
    if 2 * nlat * nlat != len(mu0.points) or not np.allclose(sphere_quadrature(3, n=nlat)[0], mu0.points, atol=1e-12):
        raise InvalidParameterError(
            "scheme 'spectral' on S^2 needs a GridMeasure on the Gauss-Legendre grid sphere_quadrature(3, n=n) "
            "(areas 4*pi*weights): the density is read at its points."
        )
    rho = mu0.mass / mu0.areas * (4 * np.pi)  # density w.r.t. σ (areas sum to 4π)
    full = sphere_harmonic_transform(nlat - 1, nlat).analysis(rho.reshape(nlat, 2 * nlat))
    full /= full[0, 0].real
    L_max = nlat - 1
    # scalar heads keep a density symmetric about the pole so: its order-0 column alone is advanced
    axial = scalar_heads(model.M, model.W) is not None and not np.any(
        np.abs(full[:, 1:]) > AXIAL_ROUNDOFF * np.abs(full[:, 0]).max())

    def initial(L_):
        c = np.zeros((L_ + 1, 1), float) if axial else np.zeros((L_ + 1, L_ + 1), complex)
        k = min(L_, L_max) + 1
        K = min(k, c.shape[1])
        c[:k, :K] = full[:k, :K].real if axial else full[:k, :K]
        return c

    return "sphere", 3, L_max, lambda L_: _Sphere(model, L_, axial), initial
