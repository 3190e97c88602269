"""``metrics.verify(path)`` (and ``headflow verify PATH``): read every byte of an output, a cell, a
cached reference or a whole store, and say what is damaged.

A file is damaged when it cannot be read whole (HDF5's Fletcher-32 or zarr's CRC32C checksum fails,
or the file is truncated), or when its digest (:func:`metrics._runs.integrity.dataset_sha256`) is not
the one recorded: in a command output's ``headflow_sha256`` attr, in a store's index for its cells and
references, in a cell's own ``content_sha256`` attr.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import warnings

import xarray as xr

from particles.validation import Instance, declare

from .integrity import DIGEST_ATTR, INDEX_NAME, StoreIndex, dataset_sha256

__all__ = ["verify", "VerifyReport", "verify_dataset", "open_whole"]


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """What :func:`metrics.verify` read: ``checked`` (the files and stores, relative to ``path``) and
    ``damaged`` (name: why); ``ok`` when nothing is damaged."""

    path: str
    checked: tuple = ()
    damaged: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.damaged

    def __str__(self) -> str:
        head = f"{self.path}: {len(self.checked)} checked, {len(self.damaged)} damaged"
        return "\n".join([head] + [f"  DAMAGED {name}: {why}" for name, why in self.damaged.items()])


def _is_zarr(path: pathlib.Path) -> bool:
    return path.is_dir() and any((path / n).exists() for n in ("zarr.json", ".zgroup", ".zmetadata"))


def open_whole(path) -> xr.Dataset:
    """The dataset at ``path`` (a netCDF file or a zarr folder) with every value read (so every checksum
    the storage library keeps was checked)."""
    path = pathlib.Path(path)
    if _is_zarr(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (consolidated metadata of zarr 3: a note, not damage)
            with xr.open_zarr(path, consolidated=None) as ds:
                return ds.load()
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return ds.load()


def verify_dataset(path, recorded: str | None = None) -> str:
    """Why the dataset at ``path`` is damaged, or '': it must read whole, match ``recorded`` (a digest
    from a store's index) when given, its own ``headflow_sha256`` attr and, for a cell, its
    ``content_sha256``."""
    from .store import _content_sha256

    try:
        ds = open_whole(path)
    except Exception as exc:  # unreadable, truncated, a failed Fletcher-32 or CRC32C checksum
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if recorded and recorded != dataset_sha256(ds):
        return "fails its checksum recorded in the store's index (values or attrs changed, or damaged bytes)"
    if DIGEST_ATTR in ds.attrs and ds.attrs[DIGEST_ATTR] != dataset_sha256(ds):
        return f"fails its {DIGEST_ATTR} checksum (values or attrs changed, a zarr chunk missing, or damaged bytes)"
    if "content_sha256" in ds.attrs and ds.attrs["content_sha256"] != _content_sha256(ds):
        return "fails its content_sha256 checksum (values changed or damaged bytes)"
    return ""


@declare(path=Instance((str, os.PathLike), what="the path of an output, a cell or a store folder (str or path-like)",
                       bad=(b"out.nc",)))
def verify(path) -> VerifyReport:
    """Check an output (netCDF file or zarr folder), a cell or reference file, or a store folder (each
    ``*.nc`` file in it against the store's index); return a :class:`VerifyReport` naming what is damaged.

    >>> import metrics, tempfile
    >>> metrics.verify(tempfile.mkdtemp()).ok
    True
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"metrics.verify: {str(path)!r} does not exist.")
    if path.is_dir() and not _is_zarr(path):
        index = StoreIndex(path)
        digests = index.digests()
        names = sorted(p.name for p in path.glob("*.nc"))
        damaged = {name: why for name in names if (why := verify_dataset(path / name, digests.get(name)))}
        if index.damaged_lines():
            damaged[INDEX_NAME] = f"{index.damaged_lines()} line(s) fail their checksum (ignored)"
        return VerifyReport(str(path), tuple(names), damaged)
    recorded = StoreIndex(path.parent).digests().get(path.name) if path.is_file() else None
    why = verify_dataset(path, recorded)
    return VerifyReport(str(path), (os.path.basename(path),), {path.name: why} if why else {})
