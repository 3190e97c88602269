"""The declared dependency floors are real: tools/dependency_ends.py installs them and runs the suite."""

import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("dependency_ends", ROOT / "tools" / "dependency_ends.py")
ends = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ends)


def test_every_requirement_has_a_floor_the_constraints_pin():
    """One source: the constraints are pyproject's own '>=' bounds (dependencies and the test extra)."""
    pins = ends.floor_constraints()
    names = [p.split("==")[0].lower() for p in pins]
    for name in ("numpy", "scipy", "pot", "scikit-learn", "xarray", "netcdf4", "matplotlib", "finufft", "pytest"):
        assert name in names
    assert all("==" in p and not p.split("==")[1].startswith(" ") for p in pins)
    assert any("python_version" in p for p in pins)  # markers are kept (tomli on 3.10 only)


@pytest.mark.slow
@pytest.mark.parametrize("end", ["floors", "newest"])
def test_the_suite_passes_at_both_ends_of_the_declared_ranges(end, tmp_path):
    """A fresh venv at the floors (on the oldest declared Python when this machine has it) or the newest
    releases, then the default suite: about 15 minutes each, from the package registries."""
    python = os.environ.get("HEADFLOW_FLOORS_PYTHON", sys.executable) if end == "floors" else sys.executable
    assert ends.main([end, "--python", python, "--venv", str(tmp_path / "venv"), "--", "-q", "-x"]) == 0
