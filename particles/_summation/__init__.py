"""The summation layer (public face: :mod:`particles.summation`).

exact (blocked GEMM + exp) <- routes (how a head factors, truncations, FINUFFT calls)
<- groups (heads sharing transforms) <- plan (:func:`exp_sums` and the fast plan).
"""
