r"""Product quadratures of the uniform measure on :math:`S^1`, :math:`S^2` and :math:`S^3`.

Each rule returns points (m, d) on the sphere and weights (m,) summing to 1 (the normalised
uniform measure σ), exact for trigonometric/spherical polynomials of degree below about
``n`` and spectrally accurate for analytic integrands such as :math:`e^{a\langle x, y\rangle}`:

- d = 2: the trapezoid rule in the angle, n points;
- d = 3: Gauss–Legendre in :math:`z = \cos\theta` (n nodes, since :math:`d\sigma = dz\,d\varphi/4\pi`)
  times the trapezoid rule in :math:`\varphi` (2n nodes);
- d = 4: Hopf coordinates :math:`x = (\cos\eta\cos\xi_1, \cos\eta\sin\xi_1, \sin\eta\cos\xi_2,
  \sin\eta\sin\xi_2)`, :math:`d\sigma \propto \sin\eta\cos\eta\,d\eta\,d\xi_1 d\xi_2`: Gauss–Legendre
  in :math:`u = \sin^2\eta` (uniform weight; n nodes) times trapezoid rules in :math:`\xi_1, \xi_2`
  (2n nodes each), m = 4n³.
"""

from __future__ import annotations

import numpy as np

from particles.validation import Integer, declare, keyword_only

__all__ = ["sphere_quadrature"]


@keyword_only("n")
@declare(d=Integer(2, 4, hint="Product rules exist for S^1, S^2, S^3; for larger d sample points with "
                              "particles.sample_uniform."),
         n=Integer(2, hint="Pass the number of Gauss nodes, e.g. n=32."))
def sphere_quadrature(d: int, *, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Points and weights of the product rule of the module docstring (weights sum to 1).

    Examples
    --------
    >>> pts, w = sphere_quadrature(3, n=8)
    >>> bool(np.isclose(w @ pts[:, 2] ** 2, 1 / 3))  # ∫ z² dσ = 1/d
    True
    """
    if d == 2:
        t = 2 * np.pi * np.arange(n) / n
        return np.stack([np.cos(t), np.sin(t)], 1), np.full(n, 1.0 / n)
    if d == 3:
        z, wz = np.polynomial.legendre.leggauss(n)
        phi = np.pi * np.arange(2 * n) / n
        Z, PHI = np.meshgrid(z, phi, indexing="ij")
        r = np.sqrt(1 - Z * Z)
        pts = np.stack([r * np.cos(PHI), r * np.sin(PHI), Z], -1).reshape(-1, 3)
        w = np.repeat(wz / 2, 2 * n) / (2 * n)
        return pts, w
    # d = 4
    g, wg = np.polynomial.legendre.leggauss(n)
    u = (g + 1) / 2  # u = sin²η is uniform under σ on S^3
    xi = np.pi * np.arange(2 * n) / n
    U, X1, X2 = np.meshgrid(u, xi, xi, indexing="ij")
    c, s = np.sqrt(1 - U), np.sqrt(U)
    pts = np.stack([c * np.cos(X1), c * np.sin(X1), s * np.cos(X2), s * np.sin(X2)], -1).reshape(-1, 4)
    w = np.repeat(wg / 2, 4 * n * n) / (4 * n * n)
    return pts, w
