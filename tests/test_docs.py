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


# ------------------------------------------------------------------ every path the docs name exists

_PACKAGES = ("particles", "meanfield", "metrics", "headflow")
_ALT = "|".join(_PACKAGES)
_FILE = re.compile(rf"(?<![\w./-])((?:{_ALT}|tests|benchmarks|examples|docs)/[\w./-]*\w\.(?:py|md|toml|ipynb|yml))")
_DOTTED = re.compile(rf":(?:mod|func|class|data|meth|attr):`~?((?:{_ALT})(?:\.\w+)+)`|`((?:{_ALT})(?:\.\w+)+)[(`]")
#: dotted names that are not Python objects
_NOT_OBJECTS = {"headflow.summation"}  # the summation layer's logger


def _resolves(dotted: str) -> bool:
    """A module, or an attribute chain of the longest importable module prefix."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _named_paths(text: str):
    yield from (("file", f) for f in _FILE.findall(text))
    for match in _DOTTED.finditer(text):
        yield "name", match.group(1) or match.group(2)


def test_every_path_the_docs_name_exists():
    """The pages, the README and the docstrings and comments of the four packages name files of the
    repository (``metrics/_runs/store.py``) and modules or objects (``metrics.run_sweep``,
    :mod:`metrics._runs.store`): each must exist, so a move cannot leave a stale pointer."""
    sources = [*DOCS.rglob("*.md"), ROOT / "README.md", *(p for pkg in _PACKAGES for p in (ROOT / pkg).rglob("*.py"))]
    stale, n_checked = [], 0
    for source in sources:
        for what, target in _named_paths(source.read_text()):
            n_checked += 1
            ok = (ROOT / target).exists() if what == "file" else target in _NOT_OBJECTS or _resolves(target)
            if not ok:
                stale.append(f"{source.relative_to(ROOT)}: {target}")
    assert not stale, stale
    assert n_checked > 500, n_checked  # (the patterns still match what the docs write)


@pytest.mark.parametrize("text, found", [
    ("see `metrics/registry.py` and :mod:`metrics.density`", [("file", "metrics/registry.py"),
                                                                ("name", "metrics.density")]),
    ("call `metrics.density_of_angle(f)`; ``ds.attn`` is not a path", [("name", "metrics.density_of_angle")]),
])
def test_the_path_finder_sees_what_the_docs_write(text, found):
    assert list(_named_paths(text)) == found
    assert not _resolves("metrics.density") and not _resolves("particles._core.validation.check_real_array")
    assert _resolves("metrics._runs.store") and _resolves("particles.MultiHead.scalar")


def test_the_api_pages_show_a_studys_parameters():
    """The studies' public functions are made from their settings tables: the docs' griffe extension shows
    those parameters, not the (settings, **run) of the function they wrap."""
    griffe = pytest.importorskip("griffe")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from study_signatures import StudySignatures
    finally:
        sys.path.pop(0)
    pkg = griffe.load("metrics", search_paths=[str(ROOT)], extensions=griffe.Extensions(StudySignatures()),
                      resolve_aliases=True)
    limit = pkg["mean_field_limit_study"]
    assert [p.name for p in limit.parameters][:3] == ["model", "density_fn", "n_values"]
    assert limit.parameters["t1"].default == "2.0" and limit.parameters["store"].default == "None"
