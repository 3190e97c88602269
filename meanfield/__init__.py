"""headflow.meanfield: measures on the sphere and Wasserstein gradient flows of E_multi.

The middle layer: imports particles, numpy and scipy only.
"""

from .field import first_variation, measure_energy, measure_velocity
from .flow import SCHEMES, MeanFieldResult, SphereMesh, circle_velocity, wasserstein_ascent
from .measure import EmpiricalMeasure, GridMeasure, circle_grid, fibonacci_sphere
from .quadrature import sphere_quadrature
from .spectral import SpectralSolution, ZonalMeasure, funk_hecke_log, sht_backend, sphere_harmonic_transform
from .stability import critical_kappa, funk_hecke_exp, growth_rates, harmonic_growth, uniform_growth_rate

__all__ = [
    "EmpiricalMeasure",
    "GridMeasure",
    "circle_grid",
    "fibonacci_sphere",
    "measure_velocity",
    "measure_energy",
    "first_variation",
    "wasserstein_ascent",
    "MeanFieldResult",
    "SCHEMES",
    "circle_velocity",
    "SphereMesh",
    "uniform_growth_rate",
    "critical_kappa",
    "funk_hecke_exp",
    "growth_rates",
    "harmonic_growth",
    "sphere_quadrature",
    "ZonalMeasure",
    "SpectralSolution",
    "funk_hecke_log",
    "sphere_harmonic_transform",
    "sht_backend",
]


def __getattr__(name: str):  # meanfield.extend (the extension points), loaded on first use as the docs write it
    if name == "extend":
        import importlib

        return importlib.import_module(f"{__name__}.extend")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
