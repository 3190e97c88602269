"""The one verdict rule of docs/reproductions.md, and the row it is applied to.

A row states a prediction, a measured value with an uncertainty ``sigma`` that was *measured* (spread
over seeds, draws or frames, a bootstrap, or a convergence study in the tolerance or the window) and
never derived from the prediction, the prediction's own stated error ``pred_error`` (zero unless the
statement carries one), and optionally an ``alternative``: the competing value a discriminating
measurement must reject. The criterion, fixed before any run:

- **disagrees** when ``|measured - predicted| > 2 sigma + pred_error``;
- **inconclusive** when it is within that tolerance but so is the alternative (the measurement cannot
  tell the two apart), or when the uncertainty is not finite (a single run);
- **agrees** otherwise.

The verdict is a function of the numbers; nothing types it in. A *control* row repeats a row's
measurement where the statement must fail (a regime outside its hypotheses, or a competing law): its
verdict must not be "agrees".
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

#: sigmas of measured uncertainty in the tolerance
Z = 2.0
VERDICTS = ("agrees", "disagrees", "inconclusive")


def tolerance(sigma, pred_error=0.0):
    """``Z sigma + pred_error``: how far the measurement may lie from the prediction and still agree."""
    return Z * np.asarray(sigma, dtype=float) + np.asarray(pred_error, dtype=float)


def verdict(measured, sigma, predicted, pred_error=0.0, alternative=np.nan):
    """The rule of the module docstring, elementwise; a str for scalar input, an array of str otherwise.

    >>> verdict(0.19, 0.14, 1.0, alternative=0.0)
    'disagrees'
    >>> verdict(0.68, 0.03, 2 / 3, alternative=0.5)
    'agrees'
    >>> verdict(0.6, 0.1, 2 / 3, alternative=0.5)
    'inconclusive'
    """
    m, p, alt = (np.asarray(v, dtype=float) for v in (measured, predicted, alternative))
    tol = tolerance(sigma, pred_error)
    with np.errstate(invalid="ignore"):
        unknown = ~np.isfinite(tol) | ~np.isfinite(m)
        off = np.abs(m - p) > tol
        both = np.isfinite(alt) & (np.abs(m - alt) <= tol)
    out = np.where(unknown, "inconclusive", np.where(off, "disagrees", np.where(both, "inconclusive", "agrees")))
    return str(out) if out.ndim == 0 else out


#: row key -> offset added to that row's prediction where its function computes it (the mutation test's hook)
PREDICTION_SHIFT: dict = {}


def prediction(key: str, value) -> float:
    """The prediction of row ``key``, moved by ``PREDICTION_SHIFT[key]`` when a mutation test sets one. Every row
    function passes its prediction through here *before* measuring, so a measurement that read its own
    prediction would move with it (and the mutation test, which checks that the measured value stays put,
    would fail)."""
    return float(value) + float(PREDICTION_SHIFT.get(key, 0.0))


@contextmanager
def shifted_predictions(shifts: dict):
    """Within the block, the predictions of the rows named in ``shifts`` are moved by the given offsets."""
    old = dict(PREDICTION_SHIFT)
    PREDICTION_SHIFT.clear()
    PREDICTION_SHIFT.update(shifts)
    try:
        yield
    finally:
        PREDICTION_SHIFT.clear()
        PREDICTION_SHIFT.update(old)


def mutated_prediction(measured, sigma, predicted, pred_error=0.0):
    """The prediction a mutation test puts in place of the row's: moved by 3 tolerances away from the
    measurement when the row does not disagree (it must then disagree), and set to the measurement when
    it disagrees (it must then no longer disagree). A row without a finite sigma is inconclusive
    whatever its prediction, so no mutation flips it: the recorded run must have none."""
    m, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    tol = tolerance(sigma, pred_error)
    side = np.where(p >= m, 1.0, -1.0)
    return np.where(np.abs(m - p) <= tol, p + 3 * side * tol, m)


def jeffreys(successes: int, trials: int) -> tuple[float, float]:
    """Mean and standard deviation of the Jeffreys posterior Beta(k + 1/2, N - k + 1/2) of a success
    probability: a measured uncertainty that stays positive when every run succeeds (k = N)."""
    a, b = successes + 0.5, trials - successes + 0.5
    return a / (a + b), float(np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))


@dataclass
class Row:
    """One measured statement: ``measured`` +- ``sigma`` against ``predicted`` (+- ``pred_error``).

    ``sigma_from`` says how sigma was measured; ``control_of`` names the row a control repeats
    (empty for a row); ``curves`` are the figure's data, ``dims`` their dimension names (default: the
    first curve is the axis of every curve of its length), ``extra`` scalars and short lists the page
    quotes; ``params`` the parameters the run used (the page's parameter column).
    """

    key: str
    measured: float
    sigma: float
    sigma_from: str
    predicted: float
    pred_error: float = 0.0
    alternative: float = np.nan
    control_of: str = ""
    params: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("measured", "sigma", "predicted", "pred_error", "alternative"):
            setattr(self, name, float(getattr(self, name)))

    @property
    def tolerance(self) -> float:
        return float(tolerance(self.sigma, self.pred_error))

    @property
    def verdict(self) -> str:
        return verdict(self.measured, self.sigma, self.predicted, self.pred_error, self.alternative)
