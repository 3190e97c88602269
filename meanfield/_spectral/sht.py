r"""Spherical-harmonic transforms on the Gauss–Legendre grid: :func:`sphere_harmonic_transform` with two
backends, ``"ducc0"`` (the transforms of the ``ducc0`` package, ``pip install "headflow[sht]"``: O(L^2)
memory, threaded, used when it imports) and ``"tables"`` (tables of normalised associated Legendre
functions, :mod:`meanfield._spectral.legendre`: numpy only, ~ 0.4 L^3 doubles of memory)."""

from __future__ import annotations

import numpy as np

from particles import num_threads
from particles.validation import (
    Integer,
    InvalidParameterError,
    Options,
    Relation,
    check_param,
    declare,
)

from .legendre import TableTransform, ring_synthesis_tables
from .shared import gauss_gegenbauer

#: the largest degree of the tables backend (its tables hold ~ 0.4 L^3 doubles: 3.4 GB at L = 1024)
TABLES_CAP = 1024


@declare()
def sht_backend() -> str:
    """``"ducc0"`` when the ducc0 package imports, else ``"tables"``."""
    try:
        import ducc0  # noqa: F401
    except ImportError:
        return "tables"
    return "ducc0"


class _Ducc0Transform:
    r"""ducc0's transforms on the rings z (ascending), nlon = 2 nlat longitudes from φ = 0. ducc0's
    :math:`Y_{lm} = (-1)^m\bar P_{lm}e^{im\varphi}/\sqrt{4\pi}` (Condon–Shortley phase, unit-sphere
    normalisation), so :math:`a_{lm} = (-1)^m\sqrt{4\pi}\,C_{lm}`, read in place from C[l, m] (stride L + 1
    in l)."""

    def __init__(self, L: int, z: np.ndarray, w: np.ndarray):
        self.L, self.nlat, self.w = L, len(z), w
        self.nlon = 2 * self.nlat
        self.geometry = {"theta": np.arccos(z), "nphi": np.full(self.nlat, self.nlon, dtype=np.uintp),
                         "phi0": np.zeros(self.nlat), "ringstart": np.arange(self.nlat, dtype=np.uintp) * self.nlon}

    @staticmethod
    def _scale(L):
        return np.sqrt(4 * np.pi) * (-1.0) ** np.arange(L + 1)

    def synthesis(self, Cf: np.ndarray) -> np.ndarray:
        import ducc0

        L, scale, threads = self.L, self._scale(self.L), num_threads()
        out = np.empty((Cf.shape[0], self.nlat, self.nlon))
        mstart = np.arange(L + 1, dtype=np.uintp)
        for k, C in enumerate(Cf):
            alm = np.ascontiguousarray(C * scale).reshape(1, -1)
            ducc0.sht.synthesis(alm=alm, lmax=L, mstart=mstart, lstride=L + 1, spin=0, nthreads=threads,
                                map=out[k].reshape(1, -1), **self.geometry)
        return out

    def analysis(self, ff: np.ndarray, L: int) -> np.ndarray:
        import ducc0

        threads, weights = num_threads(), (self.w / self.nlon)[:, None]
        out = np.zeros((ff.shape[0], (L + 1) * (L + 1)), complex)
        mstart = np.arange(L + 1, dtype=np.uintp)
        for k, f in enumerate(ff):
            ducc0.sht.adjoint_synthesis(map=(f * weights).reshape(1, -1), alm=out[k: k + 1], lmax=L, mstart=mstart,
                                        lstride=L + 1, spin=0, nthreads=threads, **self.geometry)
        return out.reshape(-1, L + 1, L + 1) * self._scale(L)


def ring_synthesis(C: np.ndarray, z: np.ndarray, nlon: int) -> np.ndarray:
    """Values (len(z), nlon) of the coefficients C (L+1, L+1) on the rings of latitude z at the longitudes
    φ_k = 2πk/nlon (nlon > 2L): the density of a spectral solution on a product grid."""
    C, z = np.asarray(C, dtype=complex), np.asarray(z, dtype=float)
    L = C.shape[0] - 1
    if sht_backend() == "tables":
        return ring_synthesis_tables(C, z, nlon)
    import ducc0

    nlat = len(z)
    geometry = {"theta": np.arccos(np.clip(z, -1, 1)), "nphi": np.full(nlat, nlon, dtype=np.uintp),
                "phi0": np.zeros(nlat), "ringstart": np.arange(nlat, dtype=np.uintp) * nlon}
    alm = np.ascontiguousarray(C * _Ducc0Transform._scale(L)).reshape(1, -1)
    out = ducc0.sht.synthesis(alm=alm, lmax=L, mstart=np.arange(L + 1, dtype=np.uintp), lstride=L + 1, spin=0,
                              nthreads=num_threads(), **geometry)
    return out.reshape(nlat, nlon)


_BACKENDS = {"ducc0": _Ducc0Transform, "tables": TableTransform}


@declare(L=Integer(0), nlat=Integer(2), backend=Options("auto", "ducc0", "tables"), relations=[Relation(
    ("nlat", "L"), lambda nlat, L: nlat > L, "must exceed L (Gauss-Legendre with nlat nodes resolves degree nlat - 1): "
    "use nlat >= L + 1, or ceil((3L+1)/2) to project products exactly", breaks={"nlat": 3, "L": 5})])
class sphere_harmonic_transform:  # noqa: N801 - a small callable-object API, named like a function
    r"""Spherical-harmonic transforms to degree L on the Gauss–Legendre grid of ``nlat`` latitudes.

    Grid: Gauss–Legendre nodes :math:`z_j = \cos\theta_j` (``nlat``, ascending) × ``nlon = 2 nlat``
    longitudes :math:`\varphi_k = \pi k/\text{nlat}` (the points of ``sphere_quadrature(3, n=nlat)``).
    Coefficients ``C[l, m]``, m ≥ 0, of :math:`f = \sum_l [C_{l0}\bar P_{l0} + 2\operatorname{Re}\sum_{m\ge1}
    C_{lm}\bar P_{lm}(z) e^{im\varphi}]` with :math:`\bar P_{lm}` normalised by
    :math:`\tfrac12\int_{-1}^1\bar P_{lm}^2dz = 1` (so :math:`\|f\|^2_{L^2(\sigma)} = \sum_l|C_{l0}|^2 +
    2\sum_{m\ge1}|C_{lm}|^2`). Analysis is the Gauss quadrature of f against each harmonic; both are exact
    for band-limited functions when ``nlat > L`` (analysis of a product of degree ≤ 2L projected on degree
    ≤ L needs ``nlat ≥ (3L + 1)/2``).

    ``backend``: ``"ducc0"`` (the ducc0 package's transforms: O(L^2) memory, threads of
    :func:`particles.num_threads`; install with ``pip install "headflow[sht]"``), ``"tables"`` (tables of
    :math:`\bar P_{lm}` from their three-term recurrence: numpy only, ~ 0.4 L^3 doubles, L ≤ 1024) or
    ``"auto"`` (ducc0 when it imports). Both agree to round-off (a few 1e-13 at L = 256).

    Examples
    --------
    >>> sht = sphere_harmonic_transform(4, 6)
    >>> z = sht.points[:, 2].reshape(sht.nlat, sht.nlon)
    >>> C = sht.analysis(z)
    >>> bool(np.isclose(abs(C[1, 0]), 1 / np.sqrt(3)))  # z = Y_10 / √3 in the σ-normalisation
    True
    >>> bool(np.allclose(sht.synthesis(C), z))
    True
    """

    def __init__(self, L: int, nlat: int, backend: str = "auto"):
        self.L, self.nlat, self.nlon = int(L), int(nlat), 2 * int(nlat)
        self.backend = sht_backend() if backend == "auto" else backend
        if self.backend == "ducc0" and sht_backend() != "ducc0":
            raise InvalidParameterError("backend='ducc0' of sphere_harmonic_transform needs the ducc0 package: "
                                        "pip install \"headflow[sht]\" (or use backend='tables').")
        if self.backend == "tables" and self.L > TABLES_CAP:
            raise InvalidParameterError(
                f"L={self.L} of sphere_harmonic_transform is above the cap {TABLES_CAP} of the 'tables' backend "
                "(its tables hold ~ 0.4 L^3 doubles): install ducc0 (pip install \"headflow[sht]\") and use "
                "backend='auto' or 'ducc0'.")
        # the Gauss-Legendre rule to relative round-off (numpy's leggauss weights drift by 1e-10 at 1600 nodes)
        z, w = gauss_gegenbauer(self.nlat, 3)
        self.z, self.w = z, w
        self._impl = _BACKENDS[self.backend](self.L, z, w)
        l = np.arange(self.L + 1)
        self.laplacian = -(l * (l + 1)).astype(float)

    @property
    def points(self) -> np.ndarray:
        """The grid's points (nlat * nlon, 3), latitude-major (built at the first use: 4.7e6 points at L = 1024)."""
        if not hasattr(self, "_points"):
            phi = np.pi * np.arange(self.nlon) / self.nlat
            Z, PHI = np.meshgrid(self.z, phi, indexing="ij")
            r = np.sqrt(1 - Z * Z)
            self._points = np.stack([r * np.cos(PHI), r * np.sin(PHI), Z], -1).reshape(-1, 3)
        return self._points

    def synthesis(self, C: np.ndarray) -> np.ndarray:
        """Grid values (nlat, nlon) from coefficients C (L+1, L+1) (or stacked (..., L+1, L+1))."""
        C = np.asarray(C, dtype=complex)
        if C.ndim < 2 or C.shape[-2:] != (self.L + 1, self.L + 1):
            raise InvalidParameterError(
                f"C of sphere_harmonic_transform.synthesis must have shape (..., {self.L + 1}, {self.L + 1}) "
                f"(degrees and orders 0..L={self.L}); got {C.shape}."
            )
        lead = C.shape[:-2]
        out = self._impl.synthesis(C.reshape(-1, self.L + 1, self.L + 1))
        return out.reshape(*lead, self.nlat, self.nlon)

    def analysis(self, f: np.ndarray, L: int | None = None) -> np.ndarray:
        """Coefficients (L+1, L+1) (default the transform's L) of grid values f (nlat, nlon)."""
        caller = "sphere_harmonic_transform.analysis"
        L = self.L if L is None else check_param(L, "L", caller, low=0, high=self.L, integer=True)
        f = np.asarray(f)
        if np.iscomplexobj(f) or f.ndim < 2 or f.shape[-2:] != (self.nlat, self.nlon):
            raise InvalidParameterError(
                f"f of {caller} must be real grid values of shape (..., nlat, nlon) = (..., {self.nlat}, {self.nlon}); "
                f"got {'complex ' if np.iscomplexobj(f) else ''}{f.shape}."
            )
        lead = f.shape[:-2]
        C = self._impl.analysis(np.asarray(f, dtype=float).reshape(-1, self.nlat, self.nlon), L)
        return C.reshape(*lead, L + 1, L + 1)
