"""Generations of a zarr output: a rewrite that leaves a reader of the previous one its own chunks.

A zarr reader reads every chunk by its path under the store's folder, with the metadata it read when
it opened the store; so a reader that opened an output before a ``--force`` rewrite would read the new
output's chunks under the old metadata and attrs (the swap of the folder names cannot help). zarr 3
names chunks by a *chunk key encoding*, and its two encodings name every chunk differently: ``default``
as ``<array>/c/0/0`` (``<array>/c`` for a 0-d array), ``v2`` as ``<array>/0.0`` (``<array>/0``). A
rewrite therefore writes the new generation with the other encoding than the one it replaces and links
the replaced generation's chunk files into the new folder before the swap: a reader that opened the
previous generation reads its own chunks, whole and checksummed, while a new reader, led by the new
metadata, never sees them. Only the replaced generation's own chunks are carried (never older ones),
so the folder holds at most two generations, and a reader must reopen the output after its second
rewrite (it would then read the chunks of the generation after its own).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

__all__ = ["ENCODINGS", "next_key_encoding", "carry_chunks"]

#: the two chunk key encodings of zarr 3, whose chunk names never coincide
ENCODINGS = ({"name": "default", "configuration": {"separator": "/"}},
             {"name": "v2", "configuration": {"separator": "."}})


def _arrays(store: pathlib.Path):
    """(folder, chunk key encoding name) of every zarr 3 array under ``store``."""
    for meta in sorted(store.rglob("zarr.json")):
        try:
            doc = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("node_type") == "array":
            yield meta.parent, (doc.get("chunk_key_encoding") or {}).get("name", "default")


def next_key_encoding(old: pathlib.Path) -> dict:
    """The chunk key encoding of the generation that replaces the zarr store ``old`` (``ENCODINGS[0]``,
    zarr's default, when there is none or it is not one zarr 3 store of one encoding)."""
    names = {name for _, name in _arrays(old)} if old.is_dir() else set()
    return ENCODINGS[1] if names == {"default"} else ENCODINGS[0]


def _own_chunks(array: pathlib.Path, name: str):
    """The chunk files of ``array`` in its own encoding ``name`` (relative to the array's folder)."""
    if name == "default":
        if (array / "c").is_file():
            yield pathlib.Path("c")
        for root, _dirs, files in os.walk(array / "c"):
            yield from (pathlib.Path(root, f).relative_to(array) for f in files)
    else:
        yield from (pathlib.Path(p.name) for p in array.iterdir() if p.is_file() and p.name[:1].isdigit())


def carry_chunks(old: pathlib.Path, new: pathlib.Path) -> int:
    """Link (or copy, across file systems) the chunk files of the zarr store ``old`` in each array's own
    encoding into the same places in ``new``, the store that replaces it (written with the other
    encoding, so no name is taken); returns how many. The chunks of an array ``new`` does not have are
    carried too (a reader of the old store may read it; without metadata no new reader sees them)."""
    carried = 0
    for array, name in _arrays(old):
        rel = array.relative_to(old)
        if name not in {e["name"] for e in ENCODINGS}:
            continue
        for chunk in _own_chunks(array, name):
            target = new / rel / chunk
            if target.exists():  # (the new generation wrote this name: not a replaced chunk's place)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(array / chunk, target)
            except OSError:
                shutil.copy2(array / chunk, target)
            carried += 1
    return carried
