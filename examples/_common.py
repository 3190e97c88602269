"""Shared plumbing of the example scripts (``--out``/``--quick``, tables, figures): the installed
package's :mod:`headflow.scripts`, which the flagship (``headflow flagship``) uses too."""

from headflow.scripts import parse, pyplot, save_figure, write_table

__all__ = ["parse", "pyplot", "save_figure", "write_table"]
