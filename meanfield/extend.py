r"""The extension surface of ``meanfield``: what a package built on it (``metrics``, a user's own)
uses besides the flat public names. The private subpackage ``meanfield._spectral`` is not imported
from outside (``tests/test_architecture.py`` checks it).

:func:`gauss_gegenbauer`
    the n-point Gauss rule of the law of :math:`t = \langle x, e\rangle` under the uniform measure
    on :math:`S^{d-1}` (weight :math:`\propto (1-t^2)^{(d-3)/2}`), nodes and weights summing to 1, to
    relative round-off at any n: the spectral solver's zonal quadrature.

>>> t, w = gauss_gegenbauer(8, 3)  # d = 3: Gauss-Legendre on [-1, 1], weights halved
>>> round(float(w.sum()), 12), round(float(w @ t**2), 12)
(1.0, 0.333333333333)
"""

from __future__ import annotations

from ._spectral.shared import gauss_gegenbauer

__all__ = ["gauss_gegenbauer"]
