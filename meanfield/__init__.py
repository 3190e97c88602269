"""headflow.meanfield: measures on the sphere and Wasserstein gradient flows of E_multi.

The middle layer: imports particles, numpy and scipy only.
"""

from .measure import EmpiricalMeasure, GridMeasure, circle_grid, fibonacci_sphere

__all__ = ["EmpiricalMeasure", "GridMeasure", "circle_grid", "fibonacci_sphere"]
