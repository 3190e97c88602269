r"""Spectral solvers of the mean-field equation on :math:`S^1`, :math:`S^2` and zonal :math:`S^{d-1}`
(docs/theory.md §7).

:math:`\partial_t\rho + \operatorname{div}(\rho\, v[\rho]) = \kappa^{-1}\Delta_S\rho`, with ρ the density
of μ with respect to the normalised uniform measure σ (so the mean of ρ is 1), is solved for the
coefficients of ρ in an orthonormal basis of :math:`L^2(\sigma)` truncated at degree L:

- :math:`S^1`: Fourier modes :math:`e^{in\theta}`, :math:`|n| \le L`; heads that are scaled rotations
  :math:`M_h = \lambda_h R(\alpha_h)`, :math:`W_h = \mu_h R(\gamma_h)` (scalar heads: α = γ = 0) have
  the convolution velocity :math:`v(\theta) = \sum_h s_h[(k_h*\rho)(\theta)]` with the exact Fourier
  coefficients of :math:`e^{a\cos(\delta-\alpha)}` (:math:`I_n(a)e^{-in\alpha}`) and of
  :math:`e^{a\cos(\delta-\alpha)}\sin(\gamma-\delta)`;
- :math:`S^2`: spherical harmonics on a Gauss–Legendre × uniform-longitude grid, by the transforms of
  ``ducc0`` when it is installed (``pip install "headflow[sht]"``: band limits to 2048), else by tables of
  normalised associated Legendre functions (band limits to 512; :func:`sht_backend` says which); scalar
  heads through Funk–Hecke, general 3 × 3 heads through the summation layer evaluated on the quadrature
  grid. A density symmetric about the pole under scalar heads stays so: its order-0 column alone is
  advanced (one Legendre matrix, the cost of the zonal solver);
- zonal :math:`S^{d-1}`, any d ≥ 3: ρ depends on :math:`t = \langle x, e\rangle` only and is expanded in
  the orthonormal Gegenbauer polynomials :math:`q_l \propto C_l^{(d-2)/2}(t)` with Gauss–Gegenbauer
  quadrature; scalar heads keep the flow zonal.

The flux divergence is taken in weak form, :math:`\langle\operatorname{div}(\rho v), Y\rangle =
-\langle\rho v, \nabla Y\rangle` for every basis function Y of degree ≤ L, by the quadrature of the grid
(integrating by parts puts one factor ~ l on the transforms' round-off, where the strong form
:math:`\tfrac12[\Delta(\rho\Phi) + \rho\Delta\Phi - \Phi\Delta\rho]` put l(l+d-2) on it). The
operator :math:`(1-t^2)\,d/dt` maps degree l to l ± 1 only (Gegenbauer :math:`q_l`, and the associated
Legendre :math:`\bar P_{lm}` at fixed m), so the gradients of the basis and of a band-limited potential
are two-term sums of the basis itself. The grids hold 3/2 as many points as needed for degree L, so
the product :math:`\rho\nabla\Phi\cdot\nabla Y` of band-limited factors is integrated exactly
(no aliasing into degrees ≤ L). The Laplacian is diagonal
(:math:`-l(l+d-2)`), so the noise is integrated exactly by an integrating factor, and the nonlinear
term by the embedded Dormand–Prince 5(4) pair in the integrating-factor variables with an adaptive
step (each degree's local error ≤ ``rtol`` times its own size, down to :math:`10^{-4}` ``rtol`` ‖ρ‖).
The degree-0 coefficient never changes: mass is exact.

Honest error: after every step the *spectral tail*, the :math:`L^2(\sigma)` norm of the degrees
above :math:`L - \max(\lceil L/4\rceil, k)` relative to the norm of ρ (k the gcd of the excited
degrees, for symmetric spectra), is compared with ``tol``. With a fixed
``L`` the solver raises, naming the time and a sufficient band limit (from the fitted exponential
decay of the spectrum); with ``L=None`` it pads the coefficients with zeros (exact) and continues
at the larger L. Negative densities on the output grid beyond round-off are reported.
"""

from ._spectral.shared import funk_hecke_log
from ._spectral.sht import sht_backend, sphere_harmonic_transform
from ._spectral.solve import SpectralSolution
from ._spectral.zonal import ZonalMeasure

__all__ = ["ZonalMeasure", "SpectralSolution", "funk_hecke_log", "sphere_harmonic_transform", "sht_backend"]
