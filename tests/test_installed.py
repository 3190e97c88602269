"""The package as users install it: the wheel and the sdist built by ``python -m build``, checked by
``twine check``, the wheel installed into a fresh venv outside the checkout and used from an empty folder.

The fresh venv takes headflow from the built wheel only; its dependencies (numpy, xarray, ...) are this
test environment's, seen through a ``.pth`` line (a path line does not run that folder's own ``.pth`` files,
so an editable install of the checkout stays invisible). The interpreter runs with ``-I`` from an empty
folder: neither the checkout nor the current folder is on ``sys.path``. A full install with its dependencies
from the package index is the README's own command, run by hand and in CI from a clean clone.
"""

from __future__ import annotations

import json
import os
import pathlib
import pkgutil
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = ("particles", "meanfield", "metrics", "headflow")
# test files that import the library only (no path of the checkout): run against the installed wheel
# what an install, a build or a run leaves in a checkout (.gitignore): not part of a clean clone
LEFT_OVERS = ("*.egg-info", "build", "dist", ".venv", "venv", "__pycache__", ".git", "outputs", "site", ".hypothesis",
              ".pytest_cache", ".ruff_cache", ".benchmarks", "*.nc.part*")
SMOKE_TESTS = ["tests/particles/test_energy.py", "tests/metrics/test_transport.py"]


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def tree_modules() -> set[str]:
    """Every module of the four packages in the checkout (``pkgutil.walk_packages`` over the tree)."""
    found = set(PACKAGES)
    for pkg in PACKAGES:
        found |= {m.name for m in pkgutil.walk_packages([str(ROOT / pkg)], prefix=f"{pkg}.")}
    return found


def _module_name(path: str) -> str | None:
    if not path.endswith(".py") or path.split("/")[0] not in PACKAGES:
        return None
    parts = path[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, pathlib.Path]:
    """``python -m build`` (sdist, then the wheel built from the sdist) of a clean copy of the checkout: a
    left-over ``*.egg-info`` or ``build/`` of an earlier install would otherwise feed the build its file lists."""
    out = tmp_path_factory.mktemp("dist")
    clean = tmp_path_factory.mktemp("clean") / "headflow"
    shutil.copytree(ROOT, clean, ignore=shutil.ignore_patterns(*LEFT_OVERS))
    _run([sys.executable, "-m", "build", "--outdir", out, clean], cwd=out)
    wheel, = out.glob("headflow-*.whl")
    sdist, = out.glob("headflow-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_twine_check_passes(dist):
    out = _run([sys.executable, "-m", "twine", "check", "--strict", dist["wheel"], dist["sdist"]])
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_wheel_ships_every_module_and_data_file(dist):
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    shipped = {m for m in map(_module_name, names) if m}
    assert shipped == tree_modules(), (sorted(tree_modules() - shipped), sorted(shipped - tree_modules()))
    # package data: every file under the packages that is not Python source (py.typed today)
    data = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    assert data and data <= set(names), sorted(data - set(names))
    meta = zipfile.ZipFile(dist["wheel"]).read(next(n for n in names if n.endswith("dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    assert {"Source", "Documentation", "Changelog", "Issues"} <= {
        line.split(": ", 1)[1].split(",")[0] for line in meta.splitlines() if line.startswith("Project-URL: ")}
    assert any(n.endswith("licenses/LICENSE") for n in names)


def test_sdist_holds_what_builds_and_tests_and_nothing_private(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", ".ci/run",
                   "tests/conftest.py", "tests/golden.json", "docs/theory.md", "mkdocs.yml",
                   "examples/flagship.py", "headflow/flagship.py", "docs/data/reproductions.nc"):
        assert needed in names, needed
    private = [n for n in names if n.split("/")[0] in (".venv", "venv", "outputs", "site", "build", "dist", ".git")
               or "__pycache__" in n or n.endswith((".pyc", ".unreadable")) or ".part" in n.rsplit("/", 1)[-1]]
    assert not private, private


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> pathlib.Path:
    """A fresh venv outside the checkout with the built wheel installed; returns its bin folder."""
    env = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(env, with_pip=False, symlinks=os.name != "nt")
    python = env / "bin" / "python"
    site = _run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and pathlib.Path(p).is_dir()]
    (pathlib.Path(site) / "_headflow_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", dist["wheel"]])
    return env / "bin"


@pytest.fixture
def empty(tmp_path) -> pathlib.Path:
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder


def test_installed_wheel_imports_every_module_from_site_packages(installed, empty):
    code = ("import importlib, json, pkgutil, headflow, particles, meanfield, metrics\n"
            "names = []\n"
            "for pkg in (particles, meanfield, metrics, headflow):\n"
            "    names += [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.')]\n"
            "files = {n: importlib.import_module(n).__file__ for n in names}\n"
            "print(json.dumps({'files': files, 'version': headflow.__version__,"
            " 'same': headflow.metrics is metrics}))")
    info = json.loads(_run([installed / "python", "-I", "-c", code], cwd=empty).stdout)
    assert set(info["files"]) == tree_modules()
    venv_root = installed.parent.resolve()
    outside = [f for f in info["files"].values() if not pathlib.Path(f).resolve().is_relative_to(venv_root)]
    assert not outside, outside  # every module from the wheel, none from the checkout
    import particles

    assert info["version"] == particles.__version__ and info["same"]


def test_installed_command_line_runs_from_an_empty_folder(installed, empty):
    out = _run([installed / "headflow", "info", "--json"], cwd=empty)
    assert json.loads(out.stdout)["versions"]["headflow"]
    config = _run([installed / "headflow", "simulate", "--example"], cwd=empty).stdout
    config = config.replace("n = 64 ", "n = 8 ").replace("t1 = 10.0", "t1 = 0.2").replace("n_saves = 51", "n_saves = 3")
    (empty / "run.toml").write_text(config)
    _run([installed / "headflow", "simulate", "run.toml", "--no-progress"], cwd=empty)
    code = ("import xarray as xr, numpy as np; ds = xr.open_dataset('run.nc'); "
            "r = np.linalg.norm(ds.positions.values, axis=-1); print(ds.sizes['particle'], float(abs(r - 1).max()))")
    n, drift = _run([installed / "python", "-I", "-c", code], cwd=empty).stdout.split()
    assert int(n) == 8 and float(drift) < 1e-12


def test_installed_flagship_writes_the_datasets_and_figures(installed, empty):
    _run([installed / "headflow", "flagship", "--out", "out", "--quick"], cwd=empty)
    written = {p.name for p in (empty / "out").iterdir()}
    assert {"flagship.nc", "flagship_meanfield.nc", "flagship_large_n.nc", "flagship.md"} <= written
    assert len({n for n in written if n.endswith(".png")}) == 5
    _run([installed / "python", "-I", "-m", "headflow.flagship", "--help"], cwd=empty)


def test_installed_package_passes_its_doctests_and_a_smoke_subset(installed, tmp_path):
    # the test files run from a copy outside the checkout: the library they import is the installed one
    for name in ["tests/__init__.py", "tests/conftest.py", "tests/helpers.py", *SMOKE_TESTS]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
        init = (tmp_path / name).parent / "__init__.py"
        init.touch()
    ini = PYPROJECT["tool"]["pytest"]["ini_options"]  # the suite's own options, less its test paths
    lines = ["[pytest]", "addopts = --strict-markers -m 'not slow'", "markers =", *(f"    {m}" for m in ini["markers"]),
             "filterwarnings =", *(f"    {w}" for w in ini["filterwarnings"]),
             f"doctest_optionflags = {' '.join(ini['doctest_optionflags'])}"]
    (tmp_path / "pytest.ini").write_text("\n".join(lines) + "\n")
    out = _run([installed / "python", "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--doctest-modules",
                "--pyargs", *PACKAGES, *SMOKE_TESTS], cwd=tmp_path)
    assert " passed" in out.stdout and "failed" not in out.stdout, out.stdout[-2000:]
