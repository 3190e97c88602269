"""Writing results safely: the one atomic netCDF write, JSON for attrs, and the integrity rules.

Used by the command line and by every runner of the package: a reader sees an old file or the whole
new one, never a partial file that looks complete; every variable carries the checksum of its storage
library (Fletcher-32 in netCDF, CRC32C in zarr) and every output the digest of its attrs and values. A zarr
output that replaces another keeps the replaced generation's chunks for its readers (:func:`next_key_encoding`,
:func:`carry_chunks`).
"""

from ._data.provenance import to_json
from ._runs.generations import carry_chunks, next_key_encoding
from ._runs.integrity import (
    DIGEST_ATTR,
    DiskFullError,
    atomic_write,
    checksum_encoding,
    dataset_sha256,
    disk_full_message,
    fsync_tree,
    symlink_problem,
)
from ._runs.store import atomic_to_netcdf, set_aside, stored_cells
from ._runs.verify import VerifyReport, open_whole, verify, verify_dataset

__all__ = ["atomic_to_netcdf", "to_json", "stored_cells", "DIGEST_ATTR", "DiskFullError", "atomic_write",
           "checksum_encoding", "dataset_sha256", "disk_full_message", "fsync_tree", "symlink_problem", "set_aside",
           "VerifyReport", "open_whole", "verify", "verify_dataset", "carry_chunks", "next_key_encoding"]
