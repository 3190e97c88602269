"""The documentation: every page in the nav exists, every API directive resolves, no link leaves the repo."""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_files(nav):
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            yield from _nav_files(value)
        else:
            yield value


def _config():
    yaml = pytest.importorskip("yaml")  # PyYAML comes with dask, in the "test" extra
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_nav_pages_exist():
    pages = [p for p in _nav_files(_config()["nav"]) if not p.startswith("gallery/")]  # gallery: generated
    assert "theory.md" in pages
    for page in pages:  # (tutorial.md is rendered from the executed notebook by docs/_hooks/notebook.py)
        assert (DOCS / page).is_file() or (DOCS / page).with_suffix(".ipynb").is_file(), page


def test_api_directives_resolve():
    for page in (DOCS / "api").glob("*.md"):
        for target in re.findall(r"^::: ([\w.]+)", page.read_text(), re.M):
            module, _, attr = target.rpartition(".")
            try:
                importlib.import_module(target)
            except ModuleNotFoundError:
                assert hasattr(importlib.import_module(module), attr), (page.name, target)


def test_docs_stay_in_the_repository():
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        assert "../shared" not in text and "THEORY.md" not in text, page


def test_every_example_is_in_the_gallery():
    hook = (DOCS / "_hooks" / "gallery.py").read_text()
    assert 'glob("*.py")' in hook  # the gallery is generated from examples/, so it cannot miss one
    assert [p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")  # the "docs" extra
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path)], cwd=ROOT, check=True)
    assert (tmp_path / "theory" / "index.html").is_file()
    assert (tmp_path / "gallery" / "flagship" / "index.html").is_file()


def test_api_reference_covers_every_public_name():
    """Each name of a submodule's __all__ is rendered: re-exported by its package (``::: metrics``
    renders __all__), or named in a directive, or listed under its module's directive."""
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    directives = set(re.findall(r"^::: ([\w.]+)", text, re.M))
    listed = set(re.findall(r"^\s+- (\w+)$", text, re.M))
    import pkgutil

    missing = []
    for package in ("meanfield", "metrics"):
        pkg = importlib.import_module(package)
        assert package in directives
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package}.{info.name}")
            for name in getattr(module, "__all__", []):
                full = f"{package}.{info.name}"
                if name in pkg.__all__ or f"{full}.{name}" in directives or (full in directives and name in listed):
                    continue
                missing.append(f"{full}.{name}")
    assert not missing, missing
