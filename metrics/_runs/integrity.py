"""Integrity of every file headflow writes: checksums the storage libraries verify on read, digests
headflow verifies itself, durable atomic writes and the store's index.

- **Checksums on read.** Every netCDF variable headflow writes carries HDF5's Fletcher-32 filter
  (a damaged chunk fails to read: ``NetCDF: HDF error``) and every zarr array a CRC32C codec (zarr's
  own ``crc32c`` codec on zarr 3, numcodecs' ``CRC32C`` filter on zarr 2): :func:`checksum_encoding`.
  Scalar variables (which HDF5 stores unchunked, without the filter) and deleted zarr chunks (read
  back as the fill value) are covered by the digest.
- **Digests.** :func:`dataset_sha256` hashes a dataset's attrs and every variable's name, dims,
  dtype, attrs and values, in a form that survives the round trip through netCDF and zarr. A
  command's output records its own in its ``headflow_sha256`` attr; a store records the digest of each
  cell and cached reference in its index (:class:`StoreIndex`), out of reach of a tool that edits a
  file's attrs.
- **Full disks named.** A write that fails on a full disk, a quota or a file-size limit raises
  :class:`DiskFullError` naming the path (the netCDF library's ``HDF error`` is traced back to its cause).
- **Durable atomic writes.** :func:`atomic_write` writes to ``<name>.part<pid>`` (before the suffix
  when the writer reads the format from it) in the target's folder, flushes it to disk (fsync), renames
  it over the target and flushes the folder; a symbolic link at the target is refused
  (:func:`symlink_problem`, the command line's rule too), never written through.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import pathlib
import re

import numpy as np

__all__ = ["DiskFullError", "DamagedFileWarning", "checksum_encoding", "dataset_sha256", "atomic_write",
           "symlink_problem", "fsync_tree", "StoreIndex", "DIGEST_ATTR", "disk_full_message"]

#: the attr of a command's output that holds :func:`dataset_sha256` of the rest of it
DIGEST_ATTR = "headflow_sha256"
#: the store's index: one verified JSON line per file headflow wrote there (and the part file it wrote it through)
INDEX_NAME = "headflow_index.jsonl"
_LOCK_NAME = "headflow_index.lock"
#: errors of a full disk, an exhausted quota and a file-size limit
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DamagedFileWarning(UserWarning):
    """A file headflow wrote failed verification (unreadable, or not the digest recorded for it); its bytes
    are kept as ``<name>.unreadable`` and it is rebuilt."""


def checksum_encoding(ds, fmt: str) -> dict:
    """The per-variable encoding that makes the storage library checksum every chunk of ``ds``:
    ``fletcher32`` for netCDF, a CRC32C codec after the default compressor for zarr."""
    if fmt == "netcdf":
        return {name: {"fletcher32": True} for name in ds.variables}
    import zarr

    if int(zarr.__version__.split(".")[0]) >= 3:
        from zarr.codecs import Crc32cCodec, ZstdCodec

        return {name: {"compressors": (ZstdCodec(), Crc32cCodec())} for name in ds.variables}
    import numcodecs

    crc = getattr(numcodecs, "CRC32C", numcodecs.CRC32)  # (CRC32C from numcodecs 0.13)
    return {name: {"filters": [crc()]} for name in ds.variables}


def _plain(value):
    """An attr's value as JSON sees it, the same before and after a netCDF or zarr round trip (numpy
    scalars and arrays as Python numbers and lists, a one-element list as its element)."""
    if isinstance(value, (np.ndarray, list, tuple)):
        items = [_plain(v) for v in np.asarray(value).ravel().tolist()] if isinstance(value, np.ndarray) \
            else [_plain(v) for v in value]
        return items[0] if len(items) == 1 else items
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _attrs_text(attrs: dict, skip=()) -> bytes:
    items = {str(k): _plain(v) for k, v in attrs.items() if k not in skip}
    return json.dumps(items, sort_keys=True, default=str).encode()


def dataset_sha256(ds, skip=(DIGEST_ATTR,)) -> str:
    """SHA-256 of a dataset's attrs (but ``skip``) and every variable's name, dims, dtype, attrs and values.

    Text values enter as UTF-8 (their dtype as ``str``: netCDF and zarr give text back as objects or
    fixed-width strings), so the digest of a dataset equals the digest of its copy read back."""
    h = hashlib.sha256(_attrs_text(ds.attrs, skip))
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        values = np.asarray(var.values)
        if values.dtype.kind in "OUST":
            dtype, data = "str", "\0".join(map(str, values.ravel().tolist())).encode()
        else:
            dtype, data = values.dtype.str, np.ascontiguousarray(values).tobytes()
        h.update(json.dumps([name, list(var.dims), dtype, list(values.shape)]).encode())
        h.update(_attrs_text(var.attrs))
        h.update(data)
    return h.hexdigest()


def symlink_problem(path) -> str:
    """Why ``path`` cannot be an output because it is a symbolic link (writing there would change the
    link's target, another file), or ''. The one link rule of the library and the command line."""
    path = pathlib.Path(path)
    if not path.is_symlink():
        return ""
    return (f"{str(path)!r} is a symbolic link (to {os.readlink(path)!r}); headflow never writes through a link, "
            "which would change another file. Pass the target's own path, or remove the link")


def _fsync_dir(folder: pathlib.Path) -> None:
    with contextlib.suppress(OSError):  # (some file systems cannot open or flush a folder)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(path: pathlib.Path) -> None:
    """Flush a file, or every file and folder under a folder (a zarr store), to disk."""
    path = pathlib.Path(path)
    if path.is_dir():
        for root, _dirs, files in os.walk(path):
            for name in files:
                fsync_tree(pathlib.Path(root, name))
            _fsync_dir(pathlib.Path(root))
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def part_path(path: pathlib.Path, keep_suffix: bool = False) -> pathlib.Path:
    """The temporary name of a write of ``path``: ``<name>.part<pid>``, or ``<stem>.part<pid><suffix>``
    for writers that read the format from the suffix (Pillow, ffmpeg)."""
    if keep_suffix:
        return path.with_name(f"{path.stem}.part{os.getpid()}{path.suffix}")
    return path.with_name(f"{path.name}.part{os.getpid()}")


class DiskFullError(OSError):
    """A write failed on a full disk, an exhausted quota or a file-size limit (``errno`` ENOSPC, EDQUOT or
    EFBIG); its message names the path. Nothing is left under the path's name (the write was atomic)."""

    def __str__(self) -> str:
        return str(self.strerror)


def disk_full_message(code: int, path) -> str:
    """One sentence for a write of ``path`` that failed on a full disk, a quota or a size limit."""
    why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
           errno.EFBIG: "the file would exceed the file-size limit"}[code]
    return (f"could not write {str(path)!r}: {why} ({os.strerror(code)}); the write was abandoned and nothing was "
            "left under that name. Free space (or raise the limit) and rerun.")


def _size(path: pathlib.Path) -> int:
    if path.is_dir():
        return max((_size(p) for p in path.iterdir()), default=0)
    return path.stat().st_size if path.exists() else 0


def _disk_full(exc: BaseException, tmp: pathlib.Path) -> int | None:
    """ENOSPC, EDQUOT or EFBIG when ``exc`` (raised while writing ``tmp``) came from one, else None. The netCDF
    and HDF5 libraries report them as ``NetCDF: HDF error`` and lose ``errno``: the size limit and the free
    space of the folder then say it."""
    code = getattr(exc, "errno", None)
    if code in DISK_FULL:
        return code
    if not isinstance(exc, (OSError, RuntimeError)):  # (netCDF4 raises RuntimeError for the library's errors)
        return None
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft != resource.RLIM_INFINITY and _size(tmp) + 2**16 >= soft:
            return errno.EFBIG
    with contextlib.suppress(OSError):
        st = os.statvfs(tmp.parent)
        if st.f_bavail * st.f_frsize < 2**20:
            return errno.ENOSPC
    return None


def atomic_write(path, write, *, keep_suffix: bool = False, before_rename=None, keep_on=()) -> pathlib.Path:
    """Write ``path`` through ``write(tmp)``: a temporary name in the same folder, flushed to disk and
    renamed over ``path`` (then the folder flushed), so a reader or a crash sees the old file or the whole
    new one. A symbolic link at ``path`` is refused (:func:`symlink_problem`); a failed write removes its
    temporary file (but on an exception of a type in ``keep_on``). ``before_rename(tmp)`` runs between the
    flush and the rename."""
    path = pathlib.Path(path)
    problem = symlink_problem(path)
    if problem:
        raise FileExistsError(problem)
    tmp = part_path(path, keep_suffix)
    try:
        write(tmp)
        fsync_tree(tmp)
        if before_rename is not None:
            before_rename(tmp)
    except BaseException as exc:
        code = None if isinstance(exc, DiskFullError) else _disk_full(exc, tmp)
        if not isinstance(exc, keep_on):
            _remove(tmp)
        if code is not None:
            raise DiskFullError(code, disk_full_message(code, path)) from exc
        raise
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def _remove(path: pathlib.Path) -> None:
    import shutil

    with contextlib.suppress(OSError):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


class StoreIndex:
    """The index of a store folder: for each file headflow wrote there, its digest and the part file
    it was written through, one JSON line each (with the first 16 digits of its own SHA-256, so a
    damaged line is ignored), appended under a lock (``fcntl.flock``) and compacted by :meth:`compact`.

    Only part files recorded here are ever deleted (when their writer is dead), never a user's file
    named like one."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.path = self.folder / INDEX_NAME

    @contextlib.contextmanager
    def _locked(self):
        try:
            import fcntl
        except ImportError:  # (no flock: appends of one short line are atomic on local file systems)
            yield
            return
        with open(self.folder / _LOCK_NAME, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @staticmethod
    def _line(entry: dict) -> str:
        text = json.dumps(entry, sort_keys=True)
        return f"{text}\t{hashlib.sha256(text.encode()).hexdigest()[:16]}\n"

    def _read(self, damaged: list | None = None) -> list:
        try:
            lines = self.path.read_text("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            text, _, check = line.rpartition("\t")
            if text and hashlib.sha256(text.encode()).hexdigest()[:16] == check:
                with contextlib.suppress(ValueError):
                    out.append(json.loads(text))
                    continue
            if damaged is not None:
                damaged.append(line)
        return out

    def damaged_lines(self) -> int:
        """The number of lines that fail their checksum (a torn last append, or damage)."""
        damaged: list = []
        self._read(damaged)
        return len(damaged)

    def record(self, name: str, digest: str, part: str) -> None:
        """Append ``name``'s digest and the part file it is being written through (before the part is
        written, so a killed writer's part is known to be headflow's)."""
        with self._locked():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, self._line({"name": name, "sha256": digest, "part": part}).encode())
                os.fsync(fd)
            except OSError as exc:
                if exc.errno in DISK_FULL:
                    raise DiskFullError(exc.errno, disk_full_message(exc.errno, self.path)) from exc
                raise
            finally:
                os.close(fd)

    def digests(self) -> dict:
        """The recorded digest of each file (the latest line of each name that holds one)."""
        return {e["name"]: e["sha256"] for e in self._read() if e.get("name") and e.get("sha256")}

    def compact(self, alive) -> list:
        """Remove the recorded part files whose writer is dead (``alive(pid)`` False) and rewrite the
        index with the latest line of each file (atomically); return the names of the parts removed."""
        removed = []
        with self._locked():
            entries = self._read()
            if not entries:
                return removed
            latest, parts = {}, []
            for e in entries:  # (a claimed rewrite's empty digest does not hide the last recorded one)
                if e.get("sha256") or e.get("name") not in latest:
                    latest[e.get("name")] = e
                m = re.fullmatch(r".*\.part(\d+)(\.\w+)?", str(e.get("part", "")))
                part = self.folder / str(e.get("part", ""))
                if m and os.path.basename(part) == e["part"] and (part.exists() or part.is_symlink()):
                    if alive(int(m.group(1))):
                        parts.append(e)
                    else:
                        _remove(part)
                        removed.append(part.name)
            kept = [e for name, e in latest.items() if name and (self.folder / name).exists()]
            kept += [e for e in parts if e not in kept]
            text = "".join(self._line(e) for e in kept)
            atomic_write(self.path, lambda tmp: tmp.write_text(text, "utf-8"))
        return removed
