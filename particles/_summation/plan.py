"""The plan of one :func:`exp_sums` call: which heads go fast, at which tolerance, with which
a-posteriori bound, and why the others fall back to the exact pass (the mathematics is in
the docstring of :mod:`particles.summation`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .._core.errors import InvalidParameterError
from .._core.numerics import LOG_OVERFLOW
from .exact import HeadSums, constant_sums, exact_exp_sums
from .groups import Group, build_groups, fine_grid, prior_gsum, run_group
from .record import note
from .routes import NUFFT_SAFETY, fast_available, fast_route, nufft_library

__all__ = ["SUMMATIONS", "DEFAULT_TOL", "NUFFT_SAFETY", "MAX_EXACT_FRACTION", "exp_sums"]

logger = logging.getLogger("headflow.summation")

#: the evaluations a model may ask for
SUMMATIONS = ("exact", "fast", "auto")
#: default bound on the relative error of every partition function Z_i
DEFAULT_TOL = 1e-10
#: above this fraction of rows failing the bound, the head is not worth patching row by row
MAX_EXACT_FRACTION = 0.05
#: below this many target × source pairs "auto" stays exact (NUFFT set-up costs more)
AUTO_MIN_PAIRS = 2**22
#: FINUFFT cannot do better than this in double precision
_EPS_MIN = 1e-14
#: both NUFFT tolerances stay within the range where NUFFT_SAFETY was measured (ducc0 errs by up to
#: 2.1 eps at eps = 3e-4, above its constant 2)
_EPS_MAX = 1e-5
#: shares of a head's kernel budget: truncation + aliasing of the Fourier series (a few more modes are
#: cheap: the spreading cost depends on the tolerance alone), and the type-1 transform; the type-2
#: transform gets what is left once the type-1 modes are known (module docstring of summation)
_MODEL_SHARE = 1.0 / 32
_TYPE1_SHARE = 0.3
#: at most this many complex modes on one fine grid (memory guard, 16 bytes each)
_MAX_FINE_GRID = 2**27
# rows sampled exactly to set the NUFFT tolerances (their share of the error, not the bound itself)
_N_PROBE = 16
# sources kept in the probe's strided subset: 16 · 2^15 exps, a few percent of a transform's cost and
# one thread's work (at n = 10^5, 2^16 sources made the probe an eighth of the two-thread time); a T_i
# of β = 10 on S^2 still sums ~1,600 of them, so the estimate errs by a few percent
_PROBE_SOURCES = 2**15


def exp_sums(BM: np.ndarray, targets: np.ndarray, sources: np.ndarray, w: np.ndarray | None, *,
             summation: str = "auto", tol: float = DEFAULT_TOL, on_sphere: bool = True,
             block_elements: int | None = None, same_points: bool = False, symmetric: bool = False) -> list[HeadSums]:
    r"""Exact or fast :math:`(\log Z_i, S_i/Z_i)` of every head (module docstring).

    Parameters
    ----------
    BM : ndarray of shape (H, d, d)
        Logit matrices: the logit of target i and source j under head h is
        :math:`\langle x_i, B_h y_j\rangle` with ``B_h = BM[h]`` (β M_h for a model's rows).
    targets : ndarray of shape (m, d)
    sources : ndarray of shape (n, d)
    w : ndarray of shape (n,) or None
        Non-negative source weights (None: all 1).
    summation : {"exact", "fast", "auto"}
    tol : float in (0, 1)
        Bound on the relative error of every :math:`Z_i` that a fast result must meet.
    on_sphere : bool
        Targets and sources are unit vectors (enables the circle and scalar routes).
    block_elements : int, optional
        Entries of one logit tile of the exact pass (default: the working-memory rule of
        :func:`particles._core.blocking.rows_per_block`).
    same_points : bool
        ``targets is sources`` (particle flows).
    symmetric : bool
        Every B_h is symmetric (with ``same_points``, the exact pass does half the exps).

    Returns
    -------
    list of HeadSums, one per head
    """
    plan = FastPlan(BM, targets, sources, w, tol=tol, strict=summation == "fast", block_elements=block_elements,
                    symmetric=symmetric and same_points)
    if summation != "exact":
        plan.run(on_sphere, auto=summation == "auto")
    results = []
    for h in range(BM.shape[0]):
        res = plan.results.get(h)
        if res is None:
            if h in plan.reasons:
                logger.info("head %d: exact summation (%s)", h, plan.reasons[h])
            res = plan.exact(h)
            res = HeadSums(res.mean, res.logz, reason=plan.reasons.get(h, ""))
        results.append(res)
    note(results)
    return results


@dataclass
class FastPlan:
    """The fast evaluation of the heads of one :func:`exp_sums` call, step by step.

    Each step either stores a head's :class:`HeadSums` in ``results`` or records in
    ``reasons`` why the head falls back to the exact pass (with ``strict``, i.e.
    ``summation="fast"``, a fallback that breaks the user's request raises instead):
    :meth:`select` (a route exists, the size pays), :meth:`tolerances` (the NUFFT can meet the
    bound), then per transform group :meth:`evaluate` (memory guard, cost model, the
    a-posteriori bound per row, exact fixes of a few rows, one retry with a tighter budget).
    """

    BM: np.ndarray
    targets: np.ndarray
    sources: np.ndarray
    w: np.ndarray | None
    tol: float
    strict: bool
    block_elements: int | None = None
    symmetric: bool = False

    def __post_init__(self):
        self.results: dict[int, HeadSums] = {}
        self.reasons: dict[int, str] = {}
        self.wts = np.ones(self.sources.shape[0]) if self.w is None else self.w

    def exact(self, h: int, rows=None) -> HeadSums:
        """The exact pass of head h (all rows, or the given rows)."""
        if np.max(np.abs(self.BM[h])) == 0.0:
            return constant_sums(self.targets.shape[0], self.sources, self.w)
        L = (self.targets if rows is None else self.targets[rows]) @ self.BM[h]
        return exact_exp_sums(L, self.sources, self.w, self.block_elements,
                              symmetric=self.symmetric and rows is None)

    def _fallback(self, h: int, why: str, fix: str = "", *, cannot: str = "be used") -> None:
        if self.strict and fix:
            raise InvalidParameterError(f"summation='fast' cannot {cannot} for head {h}: {why}. {fix}")
        self.reasons[h] = why

    def run(self, on_sphere: bool, *, auto: bool) -> None:
        routes = self.select(on_sphere, auto=auto)
        by_eps = self.tolerances(routes)
        # one retry: heads with too many rows over the bound get the kernel budget those rows need
        for attempt in range(2):
            pending = {h: routes[h] for h in by_eps if h not in self.results and h not in self.reasons}
            if not pending:
                return
            retry = {}
            tol_model = _MODEL_SHARE * min(by_eps[h] for h in pending)
            for g in build_groups(pending, self.targets, self.sources, self.w, tol_model):
                eps1 = _type1_eps(min(by_eps[h] for h in g.heads) / prior_gsum(g))
                retry.update(self.evaluate(g, max(_EPS_MIN, eps1),
                                           by_eps, auto=auto, last=attempt == 1))
            if not retry:
                return
            by_eps.update(retry)

    def select(self, on_sphere: bool, *, auto: bool) -> dict:
        """The heads that take a fast route; constant heads are done here."""
        m, n = self.targets.shape[0], self.sources.shape[0]
        fix = "Use summation='auto' (fast where its bound holds, exact elsewhere) or summation='exact'."
        routes = {}
        for h in range(self.BM.shape[0]):
            info = fast_route(self.BM[h], on_sphere)
            if info.route == "constant":
                self.results[h] = constant_sums(m, self.sources, self.w)
            elif info.route is None:
                self._fallback(h, info.reason, fix)
            elif auto and m * n < AUTO_MIN_PAIRS:
                self._fallback(h, f"m * n = {m * n} < {AUTO_MIN_PAIRS} target-source pairs: the exact pass is cheaper")
            elif not fast_available():
                self._fallback(h, "the finufft package is not installed (pip install finufft)", fix)
            else:
                routes[h] = info
        return routes

    def tolerances(self, routes: dict) -> dict:
        """Kernel error budget per head: ``tol`` divided by the ratio ‖c‖₁ / T_i probed on a few rows."""
        m = self.targets.shape[0]
        probe = np.unique(np.linspace(0, m - 1, min(m, _N_PROBE)).astype(int))
        # the ratio only sets the NUFFT tolerances (the a-posteriori bound decides), so a strided
        # subset of the sources, reweighted, estimates T_i well enough
        stride = max(1, self.sources.shape[0] // _PROBE_SOURCES)
        sub, wsub = self.sources[::stride], self.wts[::stride]
        if wsub.sum() > 0:
            wsub = wsub * (self.wts.sum() / wsub.sum())
        else:
            sub, wsub = self.sources, self.wts
        by_eps = {}
        for h, info in routes.items():
            pr = exact_exp_sums(self.targets[probe] @ self.BM[h], sub, wsub, self.block_elements)
            ratio = _ratio_probe(info, pr, self.targets[probe], self.sources, self.wts)
            eps_n = _type1_eps(self.tol / ratio)
            if eps_n < _EPS_MIN:
                self._fallback(h, f"the bound needs NUFFT eps = {eps_n:.1e} < {_EPS_MIN:g} (weight ratio "
                                  f"||c||_1 / T_i ~ {ratio:.2e} at tol = {self.tol:g})",
                               "Raise tol, or use summation='auto' or 'exact'.", cannot=f"meet tol={self.tol:g}")
            else:
                by_eps[h] = self.tol / ratio
        return by_eps

    def evaluate(self, g: Group, eps1: float, by_eps: dict, *, auto: bool, last: bool) -> dict:
        """Run one transform group (type-1 tolerance ``eps1``); returns {head: tighter kernel budget} for
        heads to retry."""
        m, n, d = self.targets.shape[0], self.sources.shape[0], self.sources.shape[1]
        if fine_grid(g.n_modes) * (len(g.heads) + 1) > _MAX_FINE_GRID:
            for h in g.heads:
                self.reasons[h] = f"{g.n_modes} Fourier modes exceed the memory guard (beta ||M|| too large)"
            return {}
        t_fast, t_exact = _cost(g, m, n, d, eps1)
        if auto and t_fast > t_exact:
            for h in g.heads:
                self.reasons[h] = (f"the exact pass is cheaper here (estimated {t_exact:.2g} s against {t_fast:.2g} s "
                                   f"for {g.n_modes} Fourier modes)")
            return {}
        retry = {}
        norm_c = float(np.sum(g.c))

        def eps2_for(mass, gsum, C):
            return min(_type2_eps(by_eps[h], merr, eps1, A, G, norm_c, C)
                       for h, merr, A, G in zip(g.heads, g.model_err, mass, gsum))

        run = run_group(g, self.sources, eps1, eps2_for)
        for h, T, mean, off, merr, A, G in zip(g.heads, run.T, run.mean, g.offset, g.model_err, run.mass, run.gsum):
            err = _error(merr, run.eps1, run.eps2, A, G, norm_c, run.safety)
            need = self._accept(h, T, mean, off, err, t_fast, by_eps[h], g.route, last=last)
            if need is not None:
                retry[h] = by_eps[h] / (2 * need)
        return retry

    def _accept(self, h, T, mean, off, err, t_fast, budget, route, *, last: bool):
        """Store head h from its transform (T and S/T) and pointwise error, fixing a few rows exactly;
        return the factor by which its budget must shrink when a retry is cheaper, else None."""
        m, n = self.targets.shape[0], self.sources.shape[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            eta = np.where(T > err, err / (T - err), np.inf)
        bad = np.flatnonzero(~(eta <= self.tol))
        too_many = bad.size > MAX_EXACT_FRACTION * m
        # a few bad rows are fixed exactly, but at large n that fix can cost more than the
        # transforms: then a tighter budget (one more pass) is cheaper than the exact rows
        too_costly = _EXACT_PAIR_SECONDS * bad.size * n > t_fast
        if not last and (too_many or too_costly):
            # too many: the budget that would leave half the allowed rows over the bound;
            # too costly: the budget for every row with kernel mass above the error
            # (rows with eta = inf have none: cap them before the quantile)
            need = (float(np.quantile(np.minimum(eta, 1e300), 1 - MAX_EXACT_FRACTION / 2)) if too_many
                    else float(np.max(eta[np.isfinite(eta)], initial=0.0))) / self.tol
            if 1.0 < need < 1e290 and _type1_eps(budget / (2 * need)) >= _EPS_MIN:
                return need
        if too_many:
            self._fallback(h, f"{bad.size} of {m} rows have an error bound above tol={self.tol:g} (max "
                              f"{float(np.max(eta)):.1e}): the dynamic range ||c||_1/T_i is too large",
                           "Use summation='auto' or 'exact', or raise tol.", cannot="meet tol")
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            logz = off + np.log(T)
        if bad.size:
            fix = self.exact(h, bad)
            mean[bad], logz[bad], eta[bad] = fix.mean, fix.logz, 0.0
        self.results[h] = HeadSums(mean, logz, method=route, bound=float(eta.max()),
                                   n_exact=int(bad.size))
        return None


# cost model of "auto" (seconds, one core; fitted to benchmarks/bench_fastsum.py on a 2-core x86 machine)
_EXACT_PAIR_SECONDS = 7e-9  # one (target, source) pair of one head: GEMM share + exp
_POINT_SECONDS = 1.5e-7  # per non-uniform point and transform: sorting, bookkeeping
_KERNEL_SECONDS = 6e-10  # per point, transform and entry of the w^r spreading stencil
_FFT_SECONDS = 3e-8  # per fine-grid point and transform, FFT and deconvolution


def _cost(g: Group, m: int, n: int, d: int, eps: float) -> tuple[float, float]:
    """Estimated seconds of the group's transforms and of the exact pass of its heads."""
    nv = (d + 2) // 2
    nv1 = 1 if g.grad else nv  # the scalar route transforms the weights alone (S from the gradient of T)
    w = min(16, int(np.ceil(-np.log10(eps))) + 1)  # FINUFFT's kernel width for this tolerance
    r = len(g.n_modes)
    per_point = _POINT_SECONDS + _KERNEL_SECONDS * w**r
    t_fast = ((nv1 * n + nv * len(g.heads) * m) * per_point
              + (nv1 + nv * len(g.heads)) * fine_grid(g.n_modes) * _FFT_SECONDS)
    return t_fast, _EXACT_PAIR_SECONDS * m * n * len(g.heads)


def _type1_eps(budget: float) -> float:
    """Type-1 tolerance ε₁ whose term C ε₁ G (G ≤ 1 + aliasing) takes its share of a kernel budget per unit
    ‖c‖₁, with the constant C of the library that runs ε₁."""
    eps = 0.0
    for library in ("ducc0", "finufft"):
        eps = min(_EPS_MAX, _TYPE1_SHARE * budget / NUFFT_SAFETY[library])
        if nufft_library(eps) == library:
            break
    return eps


def _type2_eps(budget: float, model_err: float, eps1: float, A: float, G: float, norm_c: float, C: float) -> float:
    """Type-2 tolerance ε₂ that spends what a head's kernel budget (per unit ‖c‖₁) leaves after the model and
    the type-1 term: C ε₂ A = (budget − model − C ε₁ G) ‖c‖₁ (at most :data:`_EPS_MAX`)."""
    if A <= 0:
        return _EPS_MAX
    return min(_EPS_MAX, (budget - model_err - C * eps1 * G) * norm_c / (C * A))


def _error(model_err: float, eps1: float, eps2: float, A: float, G: float, norm_c: float, C: float) -> float:
    """The pointwise error bound e_h of T (and of each S column over max|y|): summation module docstring."""
    return (model_err + C * eps1 * G) * norm_c + C * eps2 * A


def _ratio_probe(info, pr: HeadSums, tq, sources, wts) -> float:
    """‖c‖₁ / T_i = exp(log ‖c‖₁ + offset_i − log Z_i) on the probe rows: its upper quartile, times 2."""
    if info.route in ("circle", "scalar"):
        log_c = np.log(np.sum(wts))
        off = abs(info.a)
    else:
        kk = (sources @ info.Vt.T) * np.sqrt(info.s)
        k2 = 0.5 * np.einsum("ij,ij->i", kk, kk)
        kap = float(k2.max())
        log_c = np.log(np.sum(wts * np.exp(k2 - kap)))
        q = (tq @ info.U) * np.sqrt(info.s)
        off = 0.5 * np.einsum("ij,ij->i", q, q) + kap
    with np.errstate(over="ignore"):
        r = np.exp(np.clip(log_c + off - pr.logz, -LOG_OVERFLOW, LOG_OVERFLOW))
    # the typical row sets the tolerance; outliers (isolated tokens) fail the a-posteriori
    # bound and are recomputed exactly, or, when they are many, the head falls back. Rows alike
    # (a uniform state) need no more than a margin over the largest probe
    return float(max(1.0, min(2.0 * np.quantile(r, 0.75), 1.25 * r.max())))
