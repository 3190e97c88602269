"""Writing results safely: the one atomic netCDF write and JSON for attrs.

Used by the command line and by every runner of the package: a reader sees an old file or the whole
new one, never a partial file that looks complete.
"""

from ._data.provenance import to_json
from ._runs.store import atomic_to_netcdf, stored_cells

__all__ = ["atomic_to_netcdf", "to_json", "stored_cells"]
