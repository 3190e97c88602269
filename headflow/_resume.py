"""What a resumable command says about its store folder: the finished cells it holds before a
run, how many cells the run computed (the others were read back), and what was kept when Ctrl-C or a
full disk stops it."""

from __future__ import annotations

import contextlib
import pathlib


def cells_done(store) -> tuple[int, list]:
    from metrics.io import stored_cells

    return stored_cells(store)


def resume_note(store) -> dict:
    """Say how many finished cells a store holds, and name the ``cell_*.nc`` files headflow did not write;
    returns the store's cell files with their modification times (:func:`computed_cells` counts the new ones)."""
    n_done, foreign = cells_done(store)
    if n_done:
        # (a store may hold the cells of other configs too: only this config's are read)
        print(f"resuming: {store} holds {n_done} finished cell file(s); those of this config are reused")
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        print(f"ignoring {len(foreign)} file(s) in {store} that headflow did not write: {shown}. They are not read or "
              "counted; one that has the name of a cell this run computes is renamed to <name>.unreadable (its bytes "
              "kept) and the cell is computed, the others are left as they are.")
    return _cell_stamps(store)


def _cell_stamps(store) -> dict:
    folder = pathlib.Path(store)
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("cell_*.nc")} if folder.is_dir() else {}


def computed_cells(store, before: dict) -> int:
    """The cell files a run wrote (new, or rewritten since ``before``)."""
    return sum(before.get(name) != stamp for name, stamp in _cell_stamps(store).items())


class Interrupted(Exception):
    """Ctrl-C during a run; the message says what was kept and how to resume."""


@contextlib.contextmanager
def keeping(store):
    """Ctrl-C or a full disk during a resumable run (or its output's write): say that the finished cells are
    kept in ``store`` and how to resume."""
    from metrics.io import DiskFullError

    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {kept(store)}") from None
    except DiskFullError as exc:
        raise DiskFullError(exc.errno, f"{exc} {kept(store)[0].upper()}{kept(store)[1:]}") from None


def kept(store) -> str:
    return f"{cells_done(store)[0]} finished cell file(s) are kept in {store}: rerun the same command to resume."
