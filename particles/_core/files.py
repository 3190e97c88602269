"""Files the library reads or writes: the one writability check (a store's folder, the command
line's output folder), a bounded read and the nesting depth of JSON text.

A file given by a user may be hostile (``/dev/zero``, an endless pipe, JSON nested a hundred
thousand deep): :func:`read_bounded` never holds more than its bound plus one byte, and
:func:`check_nesting` refuses JSON nested deeper than :data:`MAX_NESTING` before the parser sees
it (``json`` recurses once per level and ends in a bare RecursionError).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile

import numpy as np

from .errors import InvalidParameterError

__all__ = ["unwritable", "read_bounded", "nesting", "check_nesting", "MAX_NESTING"]

#: the deepest nesting of arrays and objects (tables) in a JSON file or a TOML config that is parsed (a model's
#: config.json or tokenizer.json nests under 10 levels, a config under 5)
MAX_NESTING = 64
#: an escape of a JSON string (a backslash and what it escapes), then a string once escapes are gone
_ESCAPE, _STRING = re.compile(r"\\.", re.S), re.compile(r'"[^"]*"')
#: each byte's step of the depth: +1 for [ and {, -1 for ] and }
_STEPS = np.zeros(256, np.int8)
_STEPS[list(b"[{")], _STEPS[list(b"]}")] = 1, -1
_CHUNK = 1 << 20


def unwritable(folder) -> OSError | None:
    """Why a new file cannot be created in ``folder`` (a probe file is made and removed), or None."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".headflow-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc
    return None


def read_bounded(path, limit: int, what: str, fix: str) -> bytes:
    """The bytes of the file at ``path`` (a regular file, a device or a pipe), read in one call of at most
    ``limit + 1`` bytes, so memory stays under the bound whatever the file is; more than ``limit`` bytes is an
    :class:`InvalidParameterError` naming ``what`` (the file), the size found, the bound and ``fix``.
    OSError propagates (the caller names it)."""
    with open(path, "rb") as fh:
        status = os.fstat(fh.fileno())
        if stat.S_ISREG(status.st_mode) and status.st_size > limit:
            raise InvalidParameterError(f"{what} holds {status.st_size:,} bytes, beyond the {limit:,} bytes headflow "
                                        f"reads from such a file; {fix}.")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InvalidParameterError(f"{what} gives more than the {limit:,} bytes headflow reads from such a file "
                                    f"(it was read no further: a device or a pipe without end); {fix}.")
    return data


def nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets and braces outside its strings):
    linear time (two regular-expression passes, then the depths in chunks of :data:`_CHUNK` bytes), no
    recursion, whatever the text."""
    codes = _STRING.sub("", _ESCAPE.sub("", text)).encode("utf-8", "surrogatepass")
    depth = deepest = 0
    for start in range(0, len(codes), _CHUNK):
        chunk = np.frombuffer(codes, np.uint8, min(_CHUNK, len(codes) - start), start)
        levels = depth + np.cumsum(_STEPS[chunk], dtype=np.int64)
        deepest, depth = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def check_nesting(text: str, what: str, fix: str) -> None:
    """Refuse JSON ``text`` nested deeper than :data:`MAX_NESTING` (an :class:`InvalidParameterError` naming
    ``what``, the depth found, the bound and ``fix``) before a recursive parser reads it."""
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise InvalidParameterError(f"{what} nests arrays or objects {depth:,} levels deep, beyond the {MAX_NESTING} "
                                    f"levels headflow parses; {fix}.")
