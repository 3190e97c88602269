"""Transport against spectral mean-field solutions: the exact references of the limit and chaos studies.

The public face of ``metrics._studies.spectral_reference``: quantiles, samples and Wasserstein
distances of a circle spectral solution, the sliced reference of a sphere one, and the
:class:`StudyReference` the studies measure particles against.
"""

from ._studies.spectral_reference import (
    SpectralSlicedReference,
    StudyReference,
    circle_spectral_quantiles,
    circle_spectral_sample,
    circle_spectral_wasserstein,
)

__all__ = ["circle_spectral_quantiles", "circle_spectral_wasserstein", "circle_spectral_sample",
           "SpectralSlicedReference", "StudyReference"]
