"""docs/reproductions.md against the dataset of its full-size run, and its sources against docs/theory.md."""

import pathlib
import re

import numpy as np
import pytest
import xarray as xr

from examples import _reproductions_page as page
from examples._reproductions_sources import ROW_TEXT, SOURCES
from examples._reproductions_verdict import verdict

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reproductions.md"
THEORY = ROOT / "docs" / "theory.md"
DATA = ROOT / "docs" / "data" / "reproductions.nc"


@pytest.fixture(scope="module")
def ds():
    if not DATA.is_file():
        pytest.fail(f"{DATA} is missing: run python examples/reproductions.py --out docs/data")
    return xr.load_dataset(DATA)


def test_page_is_the_rendered_dataset(ds):
    """Every number between the page's markers is the dataset's, to the printed digits."""
    assert page.generated_part(PAGE.read_text()) == page.render(ds)


def test_verdicts_recomputed_from_the_dataset(ds):
    again = verdict(ds.measured.values, ds.sigma.values, ds.predicted.values, ds.pred_error.values,
                    ds.alternative.values)
    assert again.tolist() == ds.verdict.values.tolist()


def test_the_page_comes_from_a_full_size_run_with_date_machine_and_seeds(ds):
    assert ds.attrs["quick"] == 0
    facts = page.generated_part(PAGE.read_text())
    for fact in (ds.attrs["date"], ds.attrs["machine"], ds.attrs["seeds"], ds.attrs["tree"]):
        assert fact and fact in facts


def test_no_control_agrees_and_every_row_has_a_measured_uncertainty(ds):
    kind = ds.kind.values
    assert not np.any(ds.verdict.values[kind == "control"] == "agrees"), list(ds.row.values[kind == "control"])
    rows = kind != "control"
    assert np.all(np.isfinite(ds.sigma.values[rows]) & (ds.sigma.values[rows] > 0))
    for key in ds.control_of.values[kind == "control"]:
        assert key in ds.row.values


def test_every_row_is_on_the_page_in_its_table(ds):
    keys = {str(k) for k in ds.row.values[ds.kind.values != "control"]}
    assert keys == set(ROW_TEXT)
    for key in keys:
        assert str(ds.kind.sel(row=key).values) == ROW_TEXT[key].table
        assert f"| `{key}` |" in PAGE.read_text()


def test_reference_ids_agree_with_the_theory_page():
    """Each tag's arXiv id is the one docs/theory.md's references give it, and every arXiv id the page
    cites is in the theory page."""
    refs = THEORY.read_text().split("## References", 1)[1]
    for tag, (_, arxiv) in SOURCES.items():
        entry = re.search(rf"^- \[{tag}\] (.*?)(?=^- |\Z)", refs, re.M | re.S)
        assert entry, f"[{tag}] is not in the references of docs/theory.md"
        assert f"arXiv:{arxiv}" in entry.group(1), tag
    cited = set(re.findall(r"arXiv:(\d{4}\.\d{4,5})", PAGE.read_text()))
    assert cited <= set(re.findall(r"arXiv:(\d{4}\.\d{4,5})", refs))


def test_unlocated_statements_say_so_and_reconstructed_ones_agree(ds):
    text = page.generated_part(PAGE.read_text())
    for key, row in ROW_TEXT.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{key}` |"))
        assert ("could not be located exactly" in line) is (not row.located), key
    # the noise threshold is reconstructed on both pages, not attributed elsewhere
    mark = "[reconstructed; a standard computation, cf. R]"
    assert mark in THEORY.read_text() and mark in PAGE.read_text()
    # authors are named only where their public text was read, next to its arXiv id
    for line in PAGE.read_text().splitlines():
        if "Mun" in line:
            assert "arXiv:2606.05140" in line and "abstract read" in line, line


def test_the_dataset_dims_are_readable(ds):
    assert not [d for d in ds.dims if re.search(r"len\d", d)]
    assert set(ds.kpr_causal__centres.dims) == {"kpr_causal_seed", "kpr_causal_t"}


def test_rendering_the_recorded_dataset_reproduces_the_page(tmp_path, ds):
    from examples import reproductions as ex

    copy = tmp_path / "reproductions.md"
    copy.write_text(PAGE.read_text().replace(page.generated_part(PAGE.read_text()), f"{page.BEGIN}\n{page.END}"))
    ex.main(["--from-dataset", str(DATA), "--page", str(copy)])
    assert copy.read_text() == PAGE.read_text()
