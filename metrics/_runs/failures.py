"""Cells that did not reach t1: their record in a dataset and the warning that names them."""

from __future__ import annotations

import warnings

__all__ = ["FailedCellWarning", "failed_cells", "warn_failed"]


class FailedCellWarning(UserWarning):
    """Cells of a sweep or study did not reach t1; the warning names them and the solver's reason,
    and the dataset records them (``failed_cells`` attr, and ``failure_message`` for a sweep)."""


def failed_cells(cells, results, names) -> list:
    """[{params, seed, message}] of every cell whose run failed, in cell order."""
    out = []
    for idx in sorted(results):
        message = str(results[idx].attrs.get("failure_message", ""))
        if message:
            _, s, params = cells[idx]
            out.append({"params": {k: v for k, v in params.items() if k in names}, "seed": s,
                        "message": message})
    return out


def warn_failed(failed: list, n_cells: int, caller: str) -> None:
    if failed:
        shown = "; ".join(f"{f['params']} seed {f['seed']}: {f['message'].rstrip('.')}" for f in failed[:3])
        more = f" (and {len(failed) - 3} more, in the dataset's failed_cells attr)" if len(failed) > 3 else ""
        warnings.warn(f"{caller}: {len(failed)} of {n_cells} cells did not reach t1 (their values after the failure "
                      f"are NaN): {shown}{more}.", FailedCellWarning, stacklevel=3)
