r"""The summation layer: every exponential attention sum, exact or fast, with its error bound.

Every quantity of an exp-kernel head (USA and softmax velocity, :math:`E_h`, the Theorem 11
rate, radial shadows, attention entropy, the mean-field velocity of a weighted measure)
comes from two sums per head and target point:

.. math::

    Z_i = \sum_j w_j e^{\beta\langle x_i, M y_j\rangle}, \qquad
    S_i = \sum_j w_j e^{\beta\langle x_i, M y_j\rangle}\, y_j ,

returned as :class:`HeadSums` (``logz`` = :math:`\log Z_i`, ``mean`` = :math:`S_i/Z_i`),
with targets :math:`x_i` (m of them), sources :math:`y_j` (n) and weights :math:`w_j \ge 0`
(1 for particles, the atom or cell masses for measures). Two evaluations:

``"exact"``
    Row-blocked GEMM + exp, O(mn) time, O(m · block) memory; the logits are shifted by the
    Cauchy–Schwarz bound :math:`\beta\|M^\top x_i\|\max_j\|y_j\|` folded into the GEMM, so
    nothing overflows at any β, and rows whose sum underflows under that shift are redone
    with the exact row maximum. This is the reference.
``"fast"``
    Non-uniform FFTs (FINUFFT), O((m + n) w^r + N^r log N) for a head of rank r ≤ 3:

    - *circle* route (S^1, heads :math:`\beta M = a R_\alpha`, a scaled rotation, which
      includes scalar heads): :math:`e^{a\cos(\theta-\varphi-\alpha)} = e^{|a|}\sum_k
      \tilde I_k(a) e^{ik(\theta-\varphi-\alpha)}` with :math:`\tilde I_k = I_k e^{-|a|}`
      (``scipy.special.ive``), one 1-D type-1 NUFFT of the weights at the source angles,
      a product with :math:`\tilde I_k e^{-ik\alpha}` per head, one 1-D type-2 NUFFT back;
    - *Gaussian* route (any d, :math:`\beta M = U\Sigma V^\top` of rank r ≤ 3): with
      :math:`q_i = \Sigma^{1/2}U^\top x_i`, :math:`k_j = \Sigma^{1/2}V^\top y_j` in
      :math:`\mathbb R^r`, :math:`e^{\langle q, k\rangle} = e^{|q|^2/2}e^{|k|^2/2}
      e^{-|q-k|^2/2}`: a discrete Gauss transform, periodised on a box of period
      :math:`P = L + \delta\sigma` (L the extent of the points, σ the Gaussian width),
      evaluated as a type-1 NUFFT, a product with the Gaussian's Fourier coefficients
      :math:`\frac{\sqrt{2\pi}\sigma}{P}e^{-(2\pi k\sigma/P)^2/2}` per axis, and a type-2
      NUFFT. Scalar heads on S^2 (:math:`M_h = \lambda_h I`, :math:`|x| = 1`) use the
      unscaled points :math:`e^{a\langle x,y\rangle} = e^{|a|}e^{-\frac{|a|}2|x \mp y|^2}`,
      so heads of similar |a| share one type-1 transform and one batched type-2 plan
      (a negative a is the reflected mode array).

    The d + 1 real weight columns :math:`w_j(1, y_j)` ride in ⌈(d+1)/2⌉ complex strength
    vectors, batched through one plan (``n_trans``).
``"auto"``
    Fast where it is cheaper and its bound meets ``tol``, exact otherwise; the reason of
    every fallback is logged on the ``headflow.summation`` logger (level INFO).

Error bound (a posteriori, per target row)
------------------------------------------
Write :math:`Z_i = e^{o_i} T_i`, :math:`T_i = \sum_j c_j K(x_i, y_j)` with a kernel
:math:`0 < K \le 1` and :math:`c_j \ge 0` (:math:`o_i` collects the constant factors).
Truncating the Fourier series, periodising, and the two NUFFTs each err by at most a
constant times :math:`\|c\|_1` pointwise (the NUFFT errors because the spreading kernel's
error is uniform and :math:`\sum_k|\hat K_k| \le 1`), so

.. math::

    |\tilde T_i - T_i| \le \varepsilon_K \|c\|_1, \qquad
    \eta_i = \frac{\varepsilon_K\|c\|_1}{\tilde T_i - \varepsilon_K\|c\|_1}
    \ \ge\ \frac{|\tilde Z_i - Z_i|}{Z_i},

with :math:`\varepsilon_K = \varepsilon_{\rm trunc} + \varepsilon_{\rm alias} +
C\sqrt2(\varepsilon_1 + \varepsilon_2)` (:math:`\varepsilon_{1,2}` FINUFFT's tolerances,
√2 for the complex packing, C = :data:`NUFFT_SAFETY`). :math:`\eta_i` bounds the relative
error of :math:`Z_i` (so of :math:`E_h` and of USA weights), :math:`2\eta_i\max_j|y_j|` the
error of the softmax mean, and :math:`\eta_i(1 + 2\beta\|M\|\max|y|)` that of the attention
entropy. Its size is set by :math:`\|c\|_1/T_i`, the ratio of the total weight to the
kernel mass seen by row i: about :math:`2\beta\lambda` for uniform tokens on S^2 and ≈ 1
in a cluster, but up to 1/w_i for a token isolated from all mass (only its own weight
near it). The FINUFFT tolerances are chosen from an exact estimate of that ratio on a few
sampled rows; rows whose bound still exceeds ``tol`` are recomputed exactly (O(n) each),
and if more than a fraction :data:`MAX_EXACT_FRACTION` of the rows would need that, the
head is evaluated exactly ("auto") or an :class:`~particles.InvalidParameterError` says
which bound failed ("fast"). Tight clusters do not change the cost or the error of the
Fourier routes.

ReLU kinds are not smooth and always use the exact pass.

References
----------
Barnett, Magland, af Klinteberg, *A parallel nonuniform fast Fourier transform library
based on an "exponential of semicircle" kernel*, SIAM J. Sci. Comput. 41 (2019);
Greengard, Strain, *The fast Gauss transform*, SIAM J. Sci. Stat. Comput. 12 (1991).
"""

from ._summation.exact import HeadSums, exact_exp_sums, relu_sums
from ._summation.plan import DEFAULT_TOL, MAX_EXACT_FRACTION, NUFFT_SAFETY, SUMMATIONS, FastPlan, exp_sums
from ._summation.routes import Route, fast_available, fast_route

__all__ = [
    "HeadSums",
    "SUMMATIONS",
    "DEFAULT_TOL",
    "NUFFT_SAFETY",
    "MAX_EXACT_FRACTION",
    "fast_available",
    "exp_sums",
    "exact_exp_sums",
    "relu_sums",
    "fast_route",
    "Route",
    "FastPlan",
]
