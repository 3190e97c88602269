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
    Non-uniform FFTs (ducc0 or FINUFFT), O((m + n) w^r + N^r log N) for a head of rank r ≤ 3:

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
      (a negative a is the reflected mode array). There S needs no transform of its own:
      :math:`\nabla_x T = -|a|(xT - S)` (:math:`+` reflected), so
      :math:`S = \pm(xT + \nabla T/|a|)`, and one type-1 transform of the weights alone
      feeds the type-2 transforms of T's modes and of :math:`ik` times them.

    Elsewhere the d + 1 real weight columns :math:`w_j(1, y_j)` ride in ⌈(d+1)/2⌉ complex
    strength vectors, batched through one plan (``n_trans``).
``"auto"``
    Fast where it is cheaper and its bound meets ``tol``, exact otherwise; the reason of
    every fallback is logged on the ``headflow.summation`` logger (level INFO).

Error bound (a posteriori, per target row)
------------------------------------------
Write :math:`Z_i = e^{o_i} T_i`, :math:`T_i = \sum_j c_j K(x_i, y_j)` with a kernel
:math:`0 < K \le 1` and :math:`c_j \ge 0` (:math:`o_i` collects the constant factors).
The computed :math:`\tilde T_i` errs pointwise by at most

.. math::

    |\tilde T_i - T_i| \le e_h = \|c\|_1\,(\varepsilon_{\rm model} + C\varepsilon_1 G_h)
    + C\varepsilon_2 A_h, \qquad
    \eta_i = \frac{e_h}{\tilde T_i - e_h} \ \ge\ \frac{|\tilde Z_i - Z_i|}{Z_i},

term by term:

1. *The packing adds nothing.* The coefficient arrays are Hermitian
   (:math:`\hat K_{-k} = \overline{\hat K_k}`: the kernel is real) on symmetric grids
   (-K..K), and the spreading kernels are real, so the whole computed operator maps a real
   strength column to a real output; a complex strength vector :math:`c + i\,c\,y_1`
   returns :math:`\tilde T + i\tilde S_1` with each part computed as if alone.
2. *Model*: truncating the Fourier series and periodising err by
   :math:`\varepsilon_{\rm model}\|c\|_1` (Gaussian tails, Bessel tails).
3. *Type 1*: the library's output for one unit point errs in every mode by at most
   :math:`C\varepsilon_1` (C = :data:`NUFFT_SAFETY` of the library, measured), so every
   mode of the sum errs by at most :math:`C\varepsilon_1\|c\|_1`, and the synthesis with
   the coefficients multiplies that by :math:`G_h = \sum_k|\hat K_k|` (≤ 1 + aliasing).
4. *Type 2*: its input is the computed :math:`a_k = \hat K_k\tilde F_k`, so its output errs
   by at most :math:`C\varepsilon_2\sum_k|a_k| = C\varepsilon_2 A_h`, with :math:`A_h`
   computed from the type-1 modes (the largest over the real columns, the S columns
   divided by max|y|). :math:`A_h \le G_h\|c\|_1`, and typically far below it
   (0.16 ‖c‖₁ for uniform tokens on S^2 at βλ = 10): the type-2 tolerance is chosen
   after the type-1 transform from what the budget leaves, and is the looser one.

The same bound with :math:`c\,y_k` for c holds for each S column. Where S comes from
:math:`\nabla T` (scalar heads on S^2), :math:`|\tilde S - S| \le |x|\,|\tilde T - T| +
|\nabla\tilde T - \nabla T|/|a|`, and the gradient's terms (its model error, and
:math:`G_h`, :math:`A_h` with :math:`|k|\hat K_k`) enter the three terms over :math:`|a|\max|y|`;
so in every route :math:`\eta_i` bounds the relative
error of :math:`Z_i` (so of :math:`E_h` and of USA weights), :math:`2\eta_i\max_j|y_j|` the
error of the softmax mean, and :math:`\eta_i(1 + 2\beta\|M\|\max|y|)` that of the attention
entropy. Its size is set by :math:`\|c\|_1/T_i`, the ratio of the total weight to the
kernel mass seen by row i: about :math:`2\beta\lambda` for uniform tokens on S^2 and ≈ 1
in a cluster, but up to 1/w_i for a token isolated from all mass (only its own weight
near it). The budget :math:`\varepsilon_K = \mathrm{tol}\,T_i/\|c\|_1` of a row is estimated
exactly on a few sampled rows and split: 1/32 to the model, 0.3 to the type-1 term, the rest to
the type-2 term; rows whose bound still exceeds ``tol`` are recomputed exactly (O(n) each),
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
