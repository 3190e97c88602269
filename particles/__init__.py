"""headflow.particles: finite-n multi-head attention dynamics on the sphere.

The bottom layer of headflow: sphere geometry, the attention kernels and their
energies, diagnostics, integrators and the one solve loop. Imports numpy and scipy only.
"""

from . import theory
from ._steppers import STEPPERS
from .attention import DEFAULT_BLOCK_ELEMENTS, KINDS, UPDATES, MultiHead
from .critical import (
    CriticalPoint,
    HessianSpectrum,
    euclidean_hessian,
    field_jacobian,
    find_critical_point,
    hessian_spectrum,
    riemannian_hessian,
    tangent_basis,
)
from .diagnostics import DIAGNOSTICS, diagnose, diagnostics_fn
from .ensemble import Ensemble
from .misalignment import (
    MISALIGNMENT,
    delta_v,
    misaligned_model,
    misalignment_fn,
    misalignment_rates,
    value_misalignment,
)
from .orthogonality import head_rate_bounds, head_rate_bounds_fn, orthogonality_defect
from .rd import (
    RD_CANDIDATES,
    RDReport,
    RDThreshold,
    radial_dominance,
    rd_margins,
    rd_threshold,
    rd_threshold_equiangular,
)
from .simulate import simulate
from .sphere import (
    FLAT,
    GEOMETRIES,
    SPHERE,
    exp_map,
    geodesic_distance,
    normalize,
    project_tangent,
    retract,
    sample_uniform,
)
from .theory import equiangular_tokens, orthogonal_tokens
from .trajectory import SaveAt, Trajectory
from .validation import (
    ConvergenceWarning,
    InvalidParameterError,
    SolverError,
    check_param,
    check_points,
    check_weights,
)
from .variants import TimeDependent, simulate_layers

__version__ = "0.1.0"

__all__ = [
    "MultiHead",
    "Ensemble",
    "theory",
    "equiangular_tokens",
    "orthogonal_tokens",
    "KINDS",
    "UPDATES",
    "TimeDependent",
    "simulate_layers",
    "DEFAULT_BLOCK_ELEMENTS",
    "STEPPERS",
    "simulate",
    "SaveAt",
    "Trajectory",
    "diagnose",
    "diagnostics_fn",
    "DIAGNOSTICS",
    "misaligned_model",
    "value_misalignment",
    "misalignment_rates",
    "misalignment_fn",
    "delta_v",
    "MISALIGNMENT",
    "orthogonality_defect",
    "head_rate_bounds",
    "head_rate_bounds_fn",
    "RD_CANDIDATES",
    "CriticalPoint",
    "HessianSpectrum",
    "euclidean_hessian",
    "field_jacobian",
    "find_critical_point",
    "hessian_spectrum",
    "riemannian_hessian",
    "tangent_basis",
    "RDReport",
    "RDThreshold",
    "radial_dominance",
    "rd_margins",
    "rd_threshold",
    "rd_threshold_equiangular",
    "project_tangent",
    "retract",
    "normalize",
    "exp_map",
    "geodesic_distance",
    "sample_uniform",
    "SPHERE",
    "FLAT",
    "GEOMETRIES",
    "InvalidParameterError",
    "SolverError",
    "ConvergenceWarning",
    "check_param",
    "check_points",
    "check_weights",
    "__version__",
]
