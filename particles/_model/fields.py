"""The declared constructor fields of :class:`~particles._model.multihead.MultiHead`: one table
that validates the constructor, :meth:`~MultiHead.replace`, :meth:`~MultiHead.scalar` and
:meth:`~MultiHead.from_qk`, and types the command line's ``[model]`` keys."""

from __future__ import annotations

import numpy as np

from .._core.declarations import Relation
from .._core.params import NONE, AnyOf, Boolean, Integer, Interval, Options
from .._core.params_data import Points, SquareStack
from .._core.sphere import GEOMETRIES
from .._summation.plan import SUMMATIONS
from .kinds import UPDATES, KindOption

__all__ = ["MODEL_FIELDS", "MODEL_RELATIONS", "OPTION_FIELDS", "STATE"]

#: a state's generic rules for the model's methods (the model's own, d and the sphere, are MultiHead.check_x's)
STATE = Points(on_sphere=False, min_d=1)

#: every constructor field's rule (M and W: the matrices; the rest: the options)
MODEL_FIELDS = dict(
    M=SquareStack(hint="Score matrices M_h = Q_h^T K_h, one (d, d) or a stack (H, d, d)."),
    W=AnyOf(NONE, SquareStack(), hint="Value matrices like M, or None for W = M (value alignment)."),
    beta=Interval(0, None, hint="beta is the inverse temperature, >= 0."),
    kind=KindOption(),
    geometry=Options(*GEOMETRIES),
    log_time_scale=AnyOf(Interval(), Options("auto"), hint="'auto' rescales USA time by exp(beta max ||M_h||)."),
    block_elements=Integer(1),
    summation=Options(*SUMMATIONS),
    tol=Interval(0, 1, closed="neither"),
    causal=Boolean(),
    update=Options(*UPDATES),
)

#: the fields a constructor from other matrices (scalar, from_qk) passes through
OPTION_FIELDS = {k: v for k, v in MODEL_FIELDS.items() if k not in ("M", "W")}

MODEL_RELATIONS = [
    Relation(("W", "M"), lambda W, M: W is None or W.shape == M.shape,
             "must hold one value matrix per head, of the shape of M (or be None: W = M)",
             breaks={"W": np.ones((2, 3, 3))}),
    Relation(("update", "geometry"), lambda u, g: UPDATES[u] in (None, g),
             "needs its geometry ('pre_ln' needs geometry='flat'; 'post_ln' and 'ngpt' need 'sphere')",
             breaks={"update": "pre_ln"}),
    Relation(("causal", "summation"), lambda c, s: not (c and s == "fast"),
             "True is exact-only: use summation='exact' or 'auto'", breaks={"causal": True, "summation": "fast"}),
]
