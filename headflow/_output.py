"""Where the commands write, checked before any work, and replaced only when headflow made it.

The rules (each one tested in ``tests/test_cli_outputs.py``, the names in ``tests/test_hostile_inputs.py``):

1. **Checked before the run.** The output name must be UTF-8 without a NUL byte (netCDF, zarr and
   the messages name files in UTF-8), each name to be created (the folders that do not exist yet,
   which the write makes, and the output's name with the longest suffix headflow gives its
   neighbours: ``.part<pid>``, ``.old<pid>``, ``.cells``) must fit the file system's
   ``PC_NAME_MAX`` bytes and the whole path its ``PC_PATH_MAX``, the path must not pass through a
   regular file, its nearest existing folder must accept a new file (a probe file is created and
   removed), and an existing
   output must be of the kind the format writes (a file for netCDF, a folder for zarr). A run
   that could not save its result never starts. A netCDF path ending in a slash (a folder's
   name) and a sweep's or study's ``store`` equal to the output path are refused.
2. **Only headflow's own outputs are replaced.** An existing output is replaced (with
   ``--force``, when its config differs) only if it is a dataset a headflow command wrote: it
   opens, and its ``headflow_output`` attr holds the SHA-256 of its own ``config`` and
   ``headflow_version`` attrs (:func:`output_stamp`, written by :func:`write_output`), which a
   file cannot carry by accident (attrs merely *named* ``config`` and ``headflow_version`` are
   not enough); a zarr folder must also hold nothing but zarr entries. Anything else (a folder
   of the user's files, an unrelated netCDF file, an unreadable file, an output of a headflow
   older than the stamp) is refused, ``--force`` or not, and left byte for byte as it was; for a
   zarr folder holding other files, the message names the first of them.
3. **Atomic, checksummed, verified.** The dataset is written to ``<path>.part<pid>`` beside the target
   with the storage library's checksum on every variable (Fletcher-32, CRC32C) and the digest of its
   attrs and values in its ``headflow_sha256`` attr, flushed to disk, read back whole and verified,
   and renamed over the target: a reader sees the old output or the whole new one.
4. **Up to date only when verified.** An output of the same config is said up to date only after
   every byte of it was read and verified (:func:`metrics.io.verify_dataset`); a damaged one is kept as
   ``<path>.unreadable`` (a :class:`metrics.DamagedFileWarning` names it) and rebuilt, a sweep's or
   study's from the verified cells of its store.
5. **One link rule.** A symbolic link at the output path is refused, as the library refuses it
   (:func:`metrics.io.symlink_problem`): headflow never writes through a link.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import warnings

from ._config import ConfigError

__all__ = ["check_output", "write_output", "output_stamp", "output_path", "verify", "VERIFY_HELP"]

VERIFY_HELP = ("read every byte of an output (netCDF or zarr), a cell or reference file, or a store folder, check it "
               "against its checksums and say what is damaged (exit status 0 when nothing is, 1 otherwise)")

#: attrs that :func:`metrics.provenance` writes into every dataset of the commands
MARKER_ATTRS = ("headflow_version", "config")
#: the attr that proves a command wrote the dataset (:func:`output_stamp` of the two above)
STAMP_ATTR = "headflow_output"
#: names a zarr store (v2 or v3) holds: metadata files and chunk keys
_ZARR_NAME = re.compile(r"zarr\.json|\.zarray|\.zattrs|\.zgroup|\.zmetadata|\d+(\.\d+)*|c")  # (c: a 0-d chunk)


def output_stamp(config: str, version: str) -> str:
    """SHA-256 of a command output's ``config`` and ``headflow_version`` attrs (its ownership stamp)."""
    blob = "\0".join(("headflow command output", str(version), str(config)))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
    for candidate in (path, *path.parents):
        try:
            if candidate.exists() or candidate.is_symlink():
                return candidate
        except OSError:  # (a name too long for the file system: nothing is there)
            continue
    return pathlib.Path(".")


def _check_parent(path: pathlib.Path) -> None:
    """The folder that will hold ``path`` exists or can be made, and accepts a new file."""
    anchor = _nearest_existing(path.parent)
    if not anchor.is_dir():
        raise ConfigError(
            f"--out {str(path)!r} passes through {str(anchor)!r}, which is a regular file, not a folder; "
            "choose an output path under a folder."
        )
    from particles.extend import unwritable

    exc = unwritable(anchor)
    if exc is not None:
        raise ConfigError(
            f"--out {str(path)!r}: the folder {str(anchor)!r} is not writable ({exc.strerror or exc}); the result "
            "could not be saved, so the run was not started. Choose an output path in a folder you can write to."
        )


def _check_name(path: pathlib.Path) -> None:
    """The output's name is one the file system and netCDF, zarr and the messages can hold (rule 1)."""
    text = os.fspath(path)
    shown = repr(os.fsencode(text)) if not text.isprintable() else repr(text)
    if "\0" in text:
        raise ConfigError(f"--out {shown} holds a NUL byte, which no file name can hold; choose another name.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = os.fsencode(text[exc.start:exc.end])
        raise ConfigError(f"--out {shown} holds the byte(s) {byte!r}, which are not UTF-8 text; netCDF, zarr and "
                          "headflow's messages name files in UTF-8, so the result could not be saved under this name "
                          "and the run was not started. Choose a name of UTF-8 characters.") from None
    anchor = _nearest_existing(path.parent)
    try:
        limit, path_limit = os.pathconf(anchor, "PC_NAME_MAX"), os.pathconf(anchor, "PC_PATH_MAX")
    except (OSError, ValueError):
        return  # (not a folder, which _check_parent refuses, or no limit the system states)
    suffix = max((f".part{os.getpid()}", f".old{os.getpid()}", ".cells"), key=len)
    named = f"the output's name with {suffix!r} (the name it is written under, then renamed)"
    sizes = [(f"the folder {name!r} it would create", len(os.fsencode(name)), limit, "PC_NAME_MAX")
             for name in path.parent.relative_to(anchor).parts]
    sizes += [(named, len(os.fsencode(path.name + suffix)), limit, "PC_NAME_MAX"),
              (f"the whole path with {suffix!r}", len(os.fsencode(text + suffix)) + 1, path_limit, "PC_PATH_MAX")]
    for part, size, bound, what in sizes:
        if size > bound:
            raise ConfigError(f"--out {shown}: {part} is {size} bytes long, beyond the {bound} bytes a "
                              f"{'path' if what == 'PC_PATH_MAX' else 'name'} may hold on this file system ({what} of "
                              f"{str(anchor)!r}); the result could not be saved, so the run was not started. Choose a "
                              "shorter name.")


def output_path(text, fmt: str) -> pathlib.Path:
    """``--out`` (or ``[output] path``) as a path; a netCDF output named with a trailing slash (a
    folder's name, which ``pathlib`` would silently turn into a file's) is refused."""
    text = os.fspath(text)
    if fmt == "netcdf" and text.endswith(("/", os.sep)):
        raise ConfigError(f"--out {text!r} ends in a slash, so it names a folder, but the netcdf output is one file; "
                          "headflow neither writes a file named like the folder nor picks a name inside it. Name the "
                          f"file, e.g. {os.path.join(text, 'run.nc')!r} (or pass --format zarr for a folder).")
    return pathlib.Path(text)


def _foreign_file(folder: pathlib.Path) -> str | None:
    """The first file under ``folder`` (relative path) that is not a zarr metadata file or chunk
    (folders are variables, groups or chunk-key levels and may have any name); None when there is none."""
    for root, _dirs, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if not _ZARR_NAME.fullmatch(name):
                return str(pathlib.Path(root, name).relative_to(folder))
    return None


def _zarr_only(folder: pathlib.Path) -> bool:
    """True when every file under ``folder`` is a zarr metadata file or chunk."""
    return _foreign_file(folder) is None


def _headflow_config(path: pathlib.Path, fmt: str) -> str | None:
    """The ``config`` attr of a dataset headflow wrote at ``path``; None when it is anything else."""
    import xarray as xr

    if fmt == "zarr" and not _zarr_only(path):
        return None
    try:
        opener = (lambda p: xr.open_zarr(p, consolidated=False)) if fmt == "zarr" else xr.open_dataset
        with opener(path) as ds:
            attrs = dict(ds.attrs)
    except Exception:  # not a readable dataset of this format: not ours
        return None
    if not all(k in attrs for k in MARKER_ATTRS):
        return None
    if str(attrs.get(STAMP_ATTR, "")) != output_stamp(attrs["config"], attrs["headflow_version"]):
        return None  # lookalike attrs (or another tool's copy of them): not a headflow output
    return str(attrs["config"])


def _check_store(path: pathlib.Path, store, section: str) -> None:
    if store is not None and os.path.abspath(store) == os.path.abspath(path):
        raise ConfigError(f"[{section}] store = {str(store)!r} is the output path (--out or [output] path) itself: the "
                          "store is the folder of finished cells, the output is the assembled dataset, and one path "
                          f"cannot hold both. Choose another [{section}] store (e.g. {str(path) + '.cells'!r}, the "
                          "default when it is not set) or another --out. Nothing was run.")


def check_output(path: pathlib.Path, fmt: str, config_json: str, force: bool, cfg: dict | None = None) -> bool:
    """Check an output path before any work; True when it already holds this config's result.

    Raises :class:`ConfigError` (exit status 2, nothing touched) for a path through a regular
    file, an unwritable folder, an existing entry of the wrong kind or not written by headflow,
    a headflow output of another config without ``force``, and a sweep's or study's ``store``
    (in ``cfg``) equal to the output path.
    """
    _check_name(path)
    for section in ("sweep", "study"):
        _check_store(path, ((cfg or {}).get(section) or {}).get("store"), section)
    kind = "folder" if fmt == "zarr" else "file"
    if fmt == "zarr" and path.is_dir() and not path.is_symlink() and (name := _foreign_file(path)) is not None:
        raise ConfigError(f"--out {str(path)!r} is a folder holding {name!r}, a file headflow did not write (a zarr "
                          "store holds only zarr entries); headflow never replaces a folder with files it did not "
                          f"write, even with --force, and left it as it is. Move {name!r} out of the folder, or "
                          "choose another --out.")
    if path.is_symlink():
        from metrics.io import symlink_problem

        raise ConfigError(f"--out {symlink_problem(path)}; nothing was run.")
    if path.exists():
        if path.is_dir() != (fmt == "zarr"):
            what = "a folder" if path.is_dir() else "a regular file"
            hint = f"e.g. {str(path / 'run.nc')!r}" if path.is_dir() and fmt == "netcdf" else "another path"
            raise ConfigError(
                f"--out {str(path)!r} is {what}, but the {fmt} output is a {kind}; headflow never replaces what it "
                f"did not write, even with --force. Choose {hint}."
            )
        existing = _headflow_config(path, fmt)
        if existing is None:
            raise ConfigError(
                f"--out {str(path)!r} exists and is not a {fmt} dataset written by a headflow command (no "
                f"{STAMP_ATTR!r} attr matching its {'/'.join(MARKER_ATTRS)} attrs; an output of a headflow older than "
                "that stamp has none either); headflow never replaces what it did not write, even with --force. "
                "Choose another --out or move the file away.")
        if existing == config_json:
            if _verified(path):
                return True
        elif not force:
            raise ConfigError(f"{str(path)!r} exists and was made from another config; pass --force to overwrite "
                              "it or choose another --out.")
    _check_parent(path)
    return False


def _verified(path: pathlib.Path) -> bool:
    """True when the output at ``path`` reads whole and matches its digest; else it is kept as
    ``<path>.unreadable``, a warning names it, and False (the run rebuilds it)."""
    from metrics import DamagedFileWarning
    from metrics.io import set_aside, verify_dataset

    why = verify_dataset(path)
    if not why:
        return True
    kept = set_aside(path)
    warnings.warn(f"{str(path)!r} has this config but {why}; it is rebuilt (from the verified cells of its store for a "
                  f"sweep or a study), and the damaged output was kept as {kept.name!r}.", DamagedFileWarning,
                  stacklevel=3)
    return False


def write_output(ds, path: pathlib.Path, fmt: str) -> None:
    """Write ``ds`` atomically (:func:`metrics.io.atomic_write`): to ``<path>.part<pid>`` with a checksum on
    every variable and its digest in its ``headflow_sha256`` attr, flushed, read back and verified, then
    renamed over ``path``.

    ``path`` was cleared by :func:`check_output` before the run; it is checked again here, since
    the run may have taken hours: if something that is not headflow's appeared there meanwhile,
    the result stays in the part file and a :class:`ConfigError` says where.
    """
    from metrics.io import (
        DIGEST_ATTR,
        atomic_write,
        carry_chunks,
        checksum_encoding,
        dataset_sha256,
        fsync_tree,
        next_key_encoding,
        verify_dataset,
    )

    path.parent.mkdir(parents=True, exist_ok=True)
    ds.attrs[STAMP_ATTR] = output_stamp(ds.attrs["config"], ds.attrs["headflow_version"])
    ds.attrs[DIGEST_ATTR] = dataset_sha256(ds)
    encoding = checksum_encoding(ds, fmt)
    zarr3 = fmt == "zarr" and all("compressors" in enc for enc in encoding.values())  # (zarr 3's codecs)
    if zarr3:  # the other chunk names than the output it replaces, whose chunks its readers keep reading
        encoding = {k: {**enc, "chunk_key_encoding": next_key_encoding(path)} for k, enc in encoding.items()}

    def write(tmp):
        if fmt == "zarr":
            with warnings.catch_warnings():
                # consolidated metadata is an extension of zarr's format 3 (zarr 3 warns so), but a store without
                # it makes xr.open_zarr(path) print a long RuntimeWarning before it falls back
                warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
                ds.to_zarr(tmp, mode="w", consolidated=True, encoding=encoding)
        else:
            ds.to_netcdf(tmp, encoding=encoding)

    def check(tmp):
        why = verify_dataset(tmp)
        if why:
            raise OSError(f"the output written to {str(tmp)!r} {why} when read back; the storage did not keep what "
                          f"was written, so {str(path)!r} was left as it was.")
        exists = path.exists() or path.is_symlink()
        if exists and (path.is_symlink() or path.is_dir() != (fmt == "zarr") or _headflow_config(path, fmt) is None):
            raise _Appeared(f"{str(path)!r} appeared during the run and is not a headflow output; it was left as it "
                            f"is and the result was saved as {str(tmp)!r}.")
        if exists and fmt == "zarr":  # a folder cannot be renamed over: move the old store aside
            if zarr3 and carry_chunks(path, tmp):  # (a reader of the old store reads its own chunks)
                fsync_tree(tmp)
            aside.append(path.with_name(path.name + f".old{os.getpid()}"))
            os.replace(path, aside[-1])

    aside: list = []
    try:
        atomic_write(path, write, before_rename=check, keep_on=(_Appeared,))
    except BaseException:
        for old in aside:  # the new store did not take the name: the old one takes it back
            if not path.exists():
                os.replace(old, path)
        raise
    for old in aside:  # dropped once the new store holds the name (a kill between the renames keeps it whole)
        shutil.rmtree(old)


class _Appeared(ConfigError):
    """Something that is not headflow's appeared at the output path during the run (the part file is kept)."""


def verify(path) -> int:
    """``headflow verify PATH``: print :func:`metrics.verify`'s report; 0 when nothing is damaged, 1 when
    something is, 2 when ``path`` does not exist."""
    import sys

    import metrics

    if not os.path.exists(path):
        print(f"headflow verify: error: {str(path)!r} does not exist.", file=sys.stderr)
        return 2
    report = metrics.verify(path)
    print(report)
    return 0 if report.ok else 1
