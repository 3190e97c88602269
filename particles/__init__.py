"""headflow.particles: finite-n multi-head attention dynamics on the sphere.

The bottom layer of headflow: sphere geometry, the attention kernels and their
energies, diagnostics, integrators and the one solve loop. Imports numpy and scipy only.
"""

import sys as _sys

from . import events, extend, summation, theory, validation  # noqa: F401  (public modules: particles.summation etc.)
from ._analysis import diagnostics as _diagnostics
from ._analysis.critical import (
    HessianSpectrum,
    euclidean_hessian,
    field_jacobian,
    hessian_spectrum,
    riemannian_hessian,
    tangent_basis,
)
from ._analysis.critical_search import CriticalPoint, find_critical_point
from ._analysis.diagnostics import DIAGNOSTICS, diagnose, diagnostics_fn
from ._analysis.misalignment import (
    MISALIGNMENT,
    delta_v,
    misaligned_model,
    misalignment_fn,
    misalignment_rates,
    value_misalignment,
)
from ._analysis.orthogonality import head_rate_bounds, head_rate_bounds_fn, orthogonality_defect
from ._analysis.radial_dominance import RD_CANDIDATES, RDReport, radial_dominance, rd_margins
from ._analysis.rd_threshold import RDThreshold, rd_threshold, rd_threshold_equiangular
from ._core import sphere as _sphere
from ._core.blocking import DEFAULT_BLOCK_ELEMENTS
from ._core.configurations import equiangular_tokens, orthogonal_tokens
from ._core.errors import ConvergenceWarning, InvalidParameterError, SolverError, StabilityWarning
from ._core.sphere import (
    FLAT,
    GEOMETRIES,
    SPHERE,
    SeedStreams,
    exp_map,
    geodesic_distance,
    normalize,
    project_tangent,
    retract,
    sample_uniform,
    seed_streams,
)
from ._core.threads import num_threads, set_num_threads
from ._dynamics import saving as _saving
from ._dynamics import solve as _solve
from ._dynamics.layers import simulate_layers
from ._dynamics.saving import SaveAt, Trajectory
from ._dynamics.solve import simulate, tqdm_class
from ._dynamics.steppers import STEPPERS
from ._kinds import Sigmoid, Sinkhorn
from ._model import ensemble as _ensemble
from ._model import multihead as _multihead
from ._model.architectures import ARCHITECTURES, load_attention, load_attention_layers
from ._model.ensemble import Ensemble
from ._model.kinds import KINDS, UPDATES
from ._model.multihead import MultiHead
from ._model.pretrained import AttentionWeights, norm_sphere
from ._model.time_dependent import TimeDependent
from .validation import check_param, check_points, check_weights

# the public module paths of the 0.1.0 release stay importable (``from particles.attention import
# MultiHead``): each is an alias of the module that now holds its contents (paths that appeared
# only after 0.1.0 and were never released are not kept)
for _old, _new in {"attention": _multihead, "ensemble": _ensemble, "sphere": _sphere, "simulate": _solve,
                   "trajectory": _saving, "diagnostics": _diagnostics}.items():
    _sys.modules.setdefault(f"{__name__}.{_old}", _new)
del _old, _new

__version__ = "0.1.0"

__all__ = [
    "MultiHead",
    "AttentionWeights",
    "ARCHITECTURES",
    "load_attention",
    "load_attention_layers",
    "norm_sphere",
    "Ensemble",
    "theory",
    "events",
    "equiangular_tokens",
    "orthogonal_tokens",
    "KINDS",
    "Sigmoid",
    "Sinkhorn",
    "UPDATES",
    "TimeDependent",
    "simulate_layers",
    "DEFAULT_BLOCK_ELEMENTS",
    "num_threads",
    "set_num_threads",
    "STEPPERS",
    "simulate",
    "tqdm_class",
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
    "seed_streams",
    "SeedStreams",
    "SPHERE",
    "FLAT",
    "GEOMETRIES",
    "InvalidParameterError",
    "SolverError",
    "ConvergenceWarning",
    "StabilityWarning",
    "check_param",
    "check_points",
    "check_weights",
    "__version__",
]
