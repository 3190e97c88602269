r"""Critical points of the multi-head field on :math:`(S^{d-1})^n` by a damped Riemannian Newton
(Levenberg–Marquardt) iteration on the field itself, with the index of the point found (the
Hessians and spectra of :mod:`~particles._analysis.critical`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.declarations import declare
from .._core.params import Integer, Interval
from .._core.sphere import normalize
from .._model.checks import Model, fits_model
from .._model.display import array_summary, fields_html, fields_repr
from .._model.fields import STATE
from .._model.multihead import MultiHead
from .critical import _POS, HessianSpectrum, _fd_jacobian, _riemannian_hessian, _spectrum

__all__ = ["CriticalPoint", "find_critical_point"]


@dataclass(frozen=True)
class CriticalPoint:
    r"""Result of :func:`find_critical_point`.

    Attributes
    ----------
    x : ndarray (n, d)
        Final state.
    residuals : ndarray (n_iter + 1,)
        :math:`\\max_i\\|F_i\\|` after each accepted iteration (the first is at x0).
    converged : bool
    n_iter : int
    spectrum : HessianSpectrum or None
        For a gradient flow (:attr:`MultiHead.gradient_flow`: aligned symmetric USA heads, no mask,
        the standard update), the Hessian spectrum at ``x``.
    jacobian_eigenvalues : ndarray
        Eigenvalues of the field's Jacobian at ``x`` (complex in general); the number with
        positive real part counts unstable directions for every kind.
    """

    x: np.ndarray
    residuals: np.ndarray
    converged: bool
    n_iter: int
    spectrum: HessianSpectrum | None
    jacobian_eigenvalues: np.ndarray

    def _fields(self) -> list:
        unstable = int(np.sum(np.real(self.jacobian_eigenvalues) > 0))
        return [("x", array_summary(self.x)), ("converged", str(bool(self.converged))), ("n_iter", str(self.n_iter)),
                ("residual", f"{self.residuals[-1]:.3g}" if len(self.residuals) else "nan"),
                ("unstable directions (Jacobian)", str(unstable)),
                ("spectrum", "None" if self.spectrum is None else f"index {self.spectrum.index}, "
                                                                  f"nullity {self.spectrum.nullity}")]

    def __repr__(self) -> str:
        return fields_repr("CriticalPoint", [(k.split(" ")[0], v) for k, v in self._fields()])

    def _repr_html_(self) -> str:
        return fields_html("CriticalPoint", self._fields())


@declare(model=Model(geometries=("sphere",)), x0=STATE, tol=_POS, max_iter=Integer(1), damping=Interval(0, None),
         step=_POS, relations=[fits_model("x0")])
def find_critical_point(model: MultiHead, x0, *, tol: float = 1e-12, max_iter: int = 50, damping: float = 1e-3,
                        step: float = 1e-6) -> CriticalPoint:
    r"""Zero of the field near ``x0`` by damped Riemannian Newton (module docstring).

    Parameters
    ----------
    model : MultiHead (sphere geometry, any kind)
    x0 : ndarray of shape (n, d), unit rows
        Initial guess, e.g. a state on a plateau of a simulated run.
    tol : float
        Stop when :math:`\max_i\|F_i\| \le` tol · (1 + scale), scale = max‖F‖ at x0.
    max_iter : int
    damping : float
        Initial λ of the Levenberg–Marquardt damping μ = λ‖J‖‖F‖.
    step : float
        Finite-difference step of the Jacobian when it is not analytic.

    Returns
    -------
    CriticalPoint

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x0 = np.array([[1.0, 0, 0]] * 2 + [[-1.0, 0, 0]] * 2) + 0.05 * rng.standard_normal((4, 3))
    >>> x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    >>> cp = find_critical_point(MultiHead.scalar([1.0], d=3, beta=1.0), x0)
    >>> cp.converged, cp.spectrum.index  # two antipodal pairs: the clusters attract (d - 1 = 2)
    (True, 2)
    """
    x = x0  # (every argument arrives checked by the declaration, x0 against the model)
    analytic = model.gradient_flow  # the field is n grad E: its Jacobian is n times the Hessian
    n, d = x.shape

    def jacobian(y):
        if analytic:
            hess, B = _riemannian_hessian(model, y)
            return n * hess, B  # ẋ = n grad E, both in the model's time units
        return _fd_jacobian(model, y, step)

    F = model(0.0, x)
    res = [float(np.linalg.norm(F, axis=1).max())]
    target = tol * (1.0 + res[0])
    lam = damping
    it = 0
    while res[-1] > target and it < max_iter:
        it += 1
        J, B = jacobian(x)
        f = np.einsum("iad,id->ia", B, F).ravel()
        JtJ = J.T @ J
        jnorm = float(np.sqrt(np.abs(JtJ).max())) or 1.0
        for _ in range(60):
            # μ = λ‖J‖‖F‖ (Fan–Yuan): the damping vanishes with the residual, which keeps the
            # convergence quadratic, also on a manifold of zeros (rotation symmetry)
            mu = lam * jnorm * float(np.linalg.norm(f))
            eta = np.linalg.solve(JtJ + mu * np.eye(len(JtJ)), -J.T @ f)
            x_new = normalize(x + np.einsum("ia,iad->id", eta.reshape(n, d - 1), B))
            F_new = model(0.0, x_new)
            r_new = float(np.linalg.norm(F_new, axis=1).max())
            if r_new < res[-1]:
                x, F = x_new, F_new
                res.append(r_new)
                lam = max(lam / 10, 1e-8)
                break
            lam *= 10
        else:
            break  # no decrease even for tiny steps: stuck at a non-zero local minimum of |F|
    converged = res[-1] <= target
    J, _ = jacobian(x)
    spectrum = _spectrum(model, x, 1e-8) if analytic else None
    return CriticalPoint(x, np.array(res), bool(converged), it, spectrum, np.linalg.eigvals(J))
