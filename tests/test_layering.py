"""Layering: particles (then meanfield) import without any higher layer or heavy dependency."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ["ot", "sklearn", "xarray", "metrics", "matplotlib", "dask"]


@pytest.mark.parametrize("package, forbidden", [("particles", HEAVY + ["meanfield"]), ("meanfield", HEAVY)])
def test_lower_layers_stay_light(package, forbidden):
    code = (
        f"import sys, json, {package}; "
        f"print(json.dumps({{'file': {package}.__file__, 'mods': sorted(sys.modules)}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    info = json.loads(out.stdout)
    assert pathlib.Path(info["file"]).resolve().is_relative_to(ROOT)  # not PyPI's "particles"
    loaded = {m.split(".")[0] for m in info["mods"]}
    assert not loaded & set(forbidden), loaded & set(forbidden)
