"""Full disks for real: each case runs a command into a small tmpfs mount, so the write fails with the file
system's own ENOSPC (not a size limit, as the ``RLIMIT_FSIZE`` cases of ``tests/test_faults.py``), and asserts
docs/guide/reliability.md's promise: one message naming the file and the full disk, the finished cells kept and
verified, no part file left, and a rerun on a disk with room resumes to the uninterrupted result.

Mounting needs Linux and the right to mount (root in a container, say); elsewhere the cases skip (slow).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import pytest
import xarray as xr

import metrics
from headflow import cli
from metrics.io import open_whole
from tests.test_cli import SIM, SWEEP

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux" or shutil.which("mount") is None, reason="tmpfs mounts")]

CASES = {  # size of the mount, command, the file the message names, the cells kept (None: no store)
    "sweep_cell": ("40k", "sweep", "out.nc.cells/cell_", 1),
    "sweep_output": ("224k", "sweep", "out.nc'", 8),
    "simulate_output": ("48k", "simulate", "out.nc'", None),
}


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a fresh tmpfs of the requested size (unmounted at the end), or a skip."""
    mounts = []

    def mount(size: str) -> pathlib.Path:
        where = tmp_path / f"disk_{uuid.uuid4().hex[:8]}"
        where.mkdir()
        run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {run.stderr.strip()}")
        mounts.append(where)
        return where

    yield mount
    for where in mounts:
        # (lazy: xarray's file cache may still hold a file of the disk open)
        subprocess.run(["umount", "--lazy", str(where)], check=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_full_disk_is_named_and_the_rerun_resumes(tmp_path, small_disk, capsys, case):
    size, cmd, names, kept = CASES[case]
    disk = small_disk(size)
    cfg = tmp_path / f"{cmd}.toml"
    cfg.write_text(SWEEP if cmd == "sweep" else SIM)
    out, store = disk / "out.nc", disk / "out.nc.cells"
    assert cli.main([cmd, str(cfg), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert f"could not write '{disk}/{names}" in err[0] and "the disk is full (No space left on device)" in err[0]
    assert "nothing was left under that name" in err[0]
    if kept is not None:
        assert f"{kept} finished cell file(s) are kept in {store}: rerun the same command to resume." in err[0]
        assert metrics.verify(store).ok and len(list(store.glob("cell_*.nc"))) == kept
    assert not out.exists() and not list(disk.rglob("*.part*"))
    # the same command on a disk with room resumes from the kept cells to the uninterrupted result
    roomy = tmp_path / "roomy"
    shutil.copytree(disk, roomy)
    assert cli.main([cmd, str(cfg), "--out", str(roomy / "out.nc"), "--no-progress"]) == 0
    fresh = tmp_path / "fresh"
    assert cli.main([cmd, str(cfg), "--out", str(fresh / "out.nc"), "--no-progress"]) == 0
    capsys.readouterr()

    def data(path):
        ds = open_whole(path)
        return ds.drop_vars([v for v in ds.data_vars if "seconds" in v]).assign_attrs({})

    xr.testing.assert_identical(data(roomy / "out.nc"), data(fresh / "out.nc"))
    assert os.path.ismount(disk)
