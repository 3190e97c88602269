"""The cell store of sweeps and studies: one verified netCDF file per finished cell.

A cell's file name comes from the SHA-256 of everything that determines it (its
``cell_key``); the file carries that key, the SHA-256 of its content and the headflow
version that wrote it, and is written atomically (to ``<name>.part<pid>``, flushed, then renamed), so
a killed run never leaves a file that looks complete. The store's index
(:class:`metrics._runs.integrity.StoreIndex`) records the digest of each cell's and cached reference's
attrs and values, and the part files headflow writes through (only those are ever removed).
:func:`atomic_to_netcdf` is the one atomic netCDF write of the package (with Fletcher-32 on every
variable); :func:`metrics._runs.integrity.atomic_write` the one atomic write of any file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import warnings

import numpy as np
import xarray as xr

from particles import __version__
from particles.extend import unwritable
from particles.validation import InvalidParameterError

from .integrity import StoreIndex, atomic_write, checksum_encoding, dataset_sha256, part_path

__all__ = ["atomic_to_netcdf", "stamp_cell", "open_store", "load_finished", "stored_cells", "CellWarning",
           "StoreMigrationWarning", "reference_path", "migrate_reference", "read_reference"]


class CellWarning(UserWarning):
    """A stored sweep cell or cached reference failed verification (or could not be read, or no longer
    holds what its parameters give) and is recomputed."""


class StoreMigrationWarning(UserWarning):
    """Cells of an earlier key format were found in a store and renamed to today's names (once)."""


def atomic_to_netcdf(ds: xr.Dataset, path, index: bool = False) -> None:
    """Write ``ds`` to ``path`` through ``<path>.part<pid>``, flushed to disk, and an atomic rename: a
    reader sees the old file or the whole new one, and a killed writer leaves only a part file. Every
    variable carries HDF5's Fletcher-32 checksum. ``index``: ``path`` is a file of a store, whose index
    records the part file before it is written and the digest of the file read back before the rename."""
    path = pathlib.Path(path)
    book = StoreIndex(path.parent) if index else None
    if book is not None:
        book.record(path.name, "", part_path(path).name)

    def read_back(tmp):
        if book is not None:
            with xr.open_dataset(tmp, engine="netcdf4") as back:
                book.record(path.name, dataset_sha256(back.load()), tmp.name)

    atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="netcdf4", encoding=checksum_encoding(ds, "netcdf")),
                 before_rename=read_back)


def stamp_cell(ds: xr.Dataset, key: str, path=None) -> xr.Dataset:
    """Add the cell's ``cell_key``, ``headflow_version`` and ``content_sha256`` attrs, and write
    it atomically to ``path`` when given."""
    ds.attrs["cell_key"] = key
    ds.attrs["headflow_version"] = __version__
    ds.attrs.setdefault("failure_message", "")
    ds.attrs["content_sha256"] = _content_sha256(ds)
    if path is not None:
        atomic_to_netcdf(ds, path, index=True)
    return ds


def _cell_key(params: dict, seed_index: int, settings: dict) -> str:
    """SHA-256 of everything that determines a cell (its file name is the first 16 digits)."""
    blob = json.dumps({"params": params, "seed": seed_index, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _content_sha256(ds: xr.Dataset) -> str:
    """SHA-256 over the names, dims, dtypes and bytes of every variable and coordinate."""
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        values = np.ascontiguousarray(var.values)
        h.update(json.dumps([name, list(var.dims), str(values.dtype), list(values.shape)]).encode())
        h.update(values.tobytes())
    return h.hexdigest()


def _verified_cell(path: pathlib.Path, key: str, digests: dict):
    """The stored cell at ``path`` if it is this cell's and intact, else (None, reason, ours).

    ``ours`` is False when the file is not a cell headflow wrote as it was written (it does not open,
    carries no ``cell_key`` attr, or fails the digest recorded in the store's index ``digests``): its
    bytes must be set aside, never removed. A cell of this version that the index does not know
    (written before the index) is checked by its own ``content_sha256`` and recorded.
    """
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except Exception as exc:  # unreadable, truncated or failing its Fletcher-32 checksum
        return None, f"cannot be read ({type(exc).__name__}: {exc})", False
    if "cell_key" not in ds.attrs:
        return None, "is not a cell headflow wrote (no cell_key attr)", False
    recorded = digests.get(path.name)
    if recorded and recorded != dataset_sha256(ds):
        return None, ("fails its checksum recorded in the store's index (its values or attrs were changed, or the "
                      "file is damaged)"), False
    if ds.attrs.get("cell_key") != key:
        return None, f"belongs to another cell (cell_key {str(ds.attrs.get('cell_key'))[:16]}...)", True
    written_by = ds.attrs.get("headflow_version", "an unknown version")
    if written_by != __version__:
        # its checksum may hold, but another version's numerics or schema must not mix into this dataset
        return None, f"was written by headflow {written_by} (this is {__version__})", True
    if ds.attrs.get("content_sha256") != _content_sha256(ds):
        return None, "fails its content checksum (values were changed or the file is corrupted)", False
    if not recorded:
        StoreIndex(path.parent).record(path.name, dataset_sha256(ds), "")
    return ds, "", True


def set_aside(path: pathlib.Path) -> pathlib.Path:
    """Rename a file headflow did not write to ``<name>.unreadable[.k]`` (its bytes kept)."""
    k, target = 0, path.with_name(path.name + ".unreadable")
    while target.exists():
        k += 1
        target = path.with_name(f"{path.name}.unreadable.{k}")
    os.replace(path, target)
    return target


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    try:  # a zombie is dead: it only waits to be reaped
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _clean_stale_parts(store: pathlib.Path) -> list:
    """Remove the part files the store's index records whose writer process is dead (never a file
    merely named like one); return their names."""
    return StoreIndex(store).compact(_pid_alive)


def open_store(store, caller: str) -> pathlib.Path:
    """The sweep's cell folder, created if missing and checked writable before any work.

    Refused with an :class:`InvalidParameterError` naming ``store``: an existing file (or a
    path through one), a folder that cannot be created, and a folder where a file cannot be
    written (read-only mount, permissions). Unrelated files in the folder are left alone: only
    ``cell_<key>.nc`` files of this sweep are read.
    """
    folder = pathlib.Path(store)
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(
            f"The 'store' parameter of {caller} must be a folder (one netCDF file per cell); {str(folder)!r} is an "
            f"existing file. Pass a folder path (it is created if missing), e.g. {str(folder) + '_cells'!r}."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidParameterError(
            f"The 'store' folder {str(folder)!r} of {caller} cannot be created ({type(exc).__name__}: "
            f"{exc.strerror or exc}). Pass a folder under a writable directory."
        ) from None
    exc = unwritable(folder)
    if exc is not None:
        raise InvalidParameterError(
            f"The 'store' folder {str(folder)!r} of {caller} is not writable ({type(exc).__name__}: "
            f"{exc.strerror or exc}); finished cells could not be saved. Pass a folder you can write to.")
    return folder


def _is_our_cell(path: pathlib.Path) -> bool:
    """A ``cell_<16 hex>.nc`` file that opens and carries the matching ``cell_key`` and a checksum attr."""
    m = re.fullmatch(r"cell_([0-9a-f]{16})\.nc", path.name)
    if m is None or not path.is_file():
        return False
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:  # the header only: no values are read
            attrs = dict(ds.attrs)
    except Exception:  # unreadable: not a cell headflow wrote (or damaged beyond recognition)
        return False
    return str(attrs.get("cell_key", "")).startswith(m.group(1)) and "content_sha256" in attrs


def stored_cells(store) -> tuple[int, list]:
    """(number of cell files headflow wrote in ``store``, sorted names of the other ``cell_*.nc``
    files there, which no run reads or counts); (0, []) when ``store`` is not a folder."""
    folder = pathlib.Path(store)
    if not folder.is_dir():
        return 0, []
    ours, foreign = 0, []
    for path in sorted(folder.glob("cell_*.nc")):
        if _is_our_cell(path):
            ours += 1
        else:
            foreign.append(path.name)
    return ours, foreign


def load_finished(store, caller, cells, keys, paths, legacy=None, current=None) -> dict:
    """The cells already in the store that pass verification; the others are recomputed, with a
    warning naming each: a damaged one (unreadable, failing a checksum) or a file headflow did not
    write is kept as ``<name>.unreadable``, headflow's own stale cell is removed. ``current(idx, ds)``:
    why a verified cell no longer holds what its parameters give today (e.g. its model), or ''.
    ``legacy``: (keys, paths) of the same cells under an earlier key format; such a cell is migrated
    (restamped with today's key, written under today's name, the old file removed) and a
    :class:`StoreMigrationWarning` says how many were."""
    folder = open_store(store, caller)
    _clean_stale_parts(folder)
    digests = StoreIndex(folder).digests()
    results, migrated = {}, 0
    for idx, path in enumerate(paths):
        if not os.path.exists(path) and legacy is not None and os.path.exists(legacy[1][idx]):
            migrated += _migrate(pathlib.Path(legacy[1][idx]), legacy[0][idx], keys[idx], path, digests)
        if not os.path.exists(path):
            continue
        ds, reason, ours = _verified_cell(pathlib.Path(path), keys[idx], digests)
        if ds is not None and current is not None and (reason := current(idx, ds)):
            ds, ours = None, True
        if ds is None:
            # headflow's own stale cell is replaced; anything else keeps its bytes under another name
            kept = "" if ours else f" (the file was kept as {set_aside(pathlib.Path(path)).name})"
            warnings.warn(f"sweep cell {os.path.basename(path)} (params {cells[idx][2]}, seed {cells[idx][1]}) "
                          f"{reason}; recomputing it{kept}.", CellWarning, stacklevel=3)
            if ours:
                os.unlink(path)
        else:
            results[idx] = ds
    if migrated:
        warnings.warn(f"{caller}: {migrated} cell file(s) in {str(folder)!r} had names of key format 1 (which held "
                      "values computed by a library call, so they could differ between machines); they were renamed "
                      "to today's names, once, and are used as they are.", StoreMigrationWarning, stacklevel=3)
    return results


def _migrate(old: pathlib.Path, old_key: str, key: str, path, digests: dict) -> int:
    """Restamp a verified cell of the earlier key format with ``key`` and move it to ``path`` (1), or
    leave an unverified one alone (0: today's cell is computed, the old file stays for the user)."""
    ds, _, _ = _verified_cell(old, old_key, digests)
    if ds is None:
        return 0
    stamp_cell(ds, key, path)
    old.unlink()
    return 1


def read_reference(path: pathlib.Path, text: str):
    """The cached reference at ``path`` when it is intact (readable, its digest the one the store's index
    records) and of the key ``text``, else None; a damaged one is kept as ``<name>.unreadable`` and a
    :class:`CellWarning` names it."""
    if not path.exists():
        return None
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
        recorded = StoreIndex(path.parent).digests().get(path.name)
        reason = "" if recorded in (None, dataset_sha256(ds)) else "fails its checksum recorded in the store's index"
    except Exception as exc:  # unreadable, truncated or failing its Fletcher-32 checksum
        ds, reason = None, f"cannot be read ({type(exc).__name__}: {exc})"
    if reason:
        kept = set_aside(path).name
        warnings.warn(f"the cached reference {path.name} in {str(path.parent)!r} {reason}; recomputing it (the "
                      f"damaged file was kept as {kept}).", CellWarning, stacklevel=4)
        return None
    return ds if ds.attrs.get("reference_key") == text else None


def reference_path(store, text: str) -> pathlib.Path:
    """A study's cached reference in ``store``: named by the SHA-256 of its key's JSON."""
    return pathlib.Path(store) / f"reference_{hashlib.sha256(text.encode()).hexdigest()[:16]}.nc"


def migrate_reference(key: dict, rho_grid, store) -> dict:
    """``key``, after moving a cached reference written under the earlier key (the density's raw bytes,
    which differ between machines in the last bits) to its name under ``key``, once, with a message."""
    if store is None:
        return key
    text = json.dumps(key, sort_keys=True, default=str)
    legacy = json.dumps({**key, "density_on_grid": hashlib.sha256(np.ascontiguousarray(rho_grid).tobytes())
                         .hexdigest()}, sort_keys=True, default=str)
    old, new = reference_path(store, legacy), reference_path(store, text)
    if old.exists() and not new.exists():
        with xr.open_dataset(old) as ds:
            ds = ds.load()
        if ds.attrs.get("reference_key") == legacy:
            ds.attrs["reference_key"] = text
            atomic_to_netcdf(ds, new, index=True)
            old.unlink()
            warnings.warn(f"the cached reference {old.name} in {str(store)!r} had a name of the earlier key format "
                          f"(the density's raw bytes); it was renamed to {new.name}, once, and is used as it is.",
                          StoreMigrationWarning, stacklevel=4)
    return key
