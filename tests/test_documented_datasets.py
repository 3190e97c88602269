"""The guides' tables of dataset variables and attrs match the datasets headflow makes (issue 37:
docs that cannot drift).

A table (or a list) in ``docs/guide/*.md`` preceded by ``<!-- documents: kind ... -->`` documents
the data variables of those dataset kinds: every backticked name of its first column (or every
``ds.<name>`` of the list) is in each produced dataset, and every data variable of the dataset is
documented (a list is checked one way: its names are in the dataset's variables or attrs).
``<!-- documents attrs: kind ... -->`` does the same for attrs, one way: every
documented attr is in each dataset (datasets carry more: the model's fields, the configuration).
A row qualified by \\(S^1\\) or \\(S^{d-1}\\) applies to the study on that sphere only; the
placeholders ``<g>``, ``<statistic>``, ``<metric>`` and ``<diagnostic>`` stand for each rated
gap, phase statistic, requested metric or saved diagnostic of the dataset.
"""

import pathlib
import re

import pytest

import metrics
import particles

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDES = sorted((ROOT / "docs" / "guide").glob("*.md"))
MARKER = re.compile(r"<!--\s*documents(?P<attrs>\s+attrs)?:\s*(?P<kinds>[\w\s-]+?)\s*-->\s*\n"
                    r"(?P<body>.*?)(?:\n\s*\n|\Z)", re.S)


def _study(d):
    model = particles.MultiHead.scalar([1.0], d=d, beta=1.0, kind="softmax")
    return metrics.mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, d - 1], n_values=(8, 16), n_seeds=2, t1=0.1,
                                          n_saves=2, m_grid=64, dt=0.05, n_projections=16, progress=False)


def _trajectory():
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    save = particles.SaveAt(ts=[0.0, 0.1], fn=particles.diagnostics_fn(model, include=["energy_multi", "entropy"]))
    traj = particles.simulate(particles.sample_uniform(5, d=3, rng=0), model, t1=0.1, dt=0.05, save=save)
    return metrics.trajectory_to_dataset(traj, model)


MAKERS = {
    "trajectory": _trajectory,
    "sweep": lambda: metrics.run_sweep({"n_particles": [4, 6]}, n_seeds=2, t1=0.1, dt=0.05, n_saves=2,
                                       metrics=("n_clusters", "energy_multi"), progress=False),
    "limit-study-s1": lambda: _study(2),
    "limit-study-s2": lambda: _study(3),
    "phase-diagram": lambda: metrics.phase_diagram([1.0, 2.0], n=4, d=2, t1=0.5, n_systems=2, n_saves=2,
                                                   progress=False),
    "chaos-study": lambda: metrics.chaos_horizon_study(
        particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax"), n_values=[64, 256], n_seeds=2, t1=8.0,
        n_saves=41, delta=(0.3,), l_max=3, dt=0.1, n_boot=20, progress=False),
}
_MADE = {}


def dataset(kind):
    if kind not in _MADE:
        _MADE[kind] = MAKERS[kind]()
    return _MADE[kind]


def _sections():
    """(page, line, attrs?, kinds, body) of every marked table or list."""
    out = []
    for page in GUIDES:
        text = page.read_text()
        for m in MARKER.finditer(text):
            line = text[:m.start()].count("\n") + 1
            out.append(pytest.param(m["attrs"] is not None, m["kinds"].split(), m["body"],
                                    id=f"{page.name}:{line}"))
    return out


SECTIONS = _sections()


def _rows(body: str) -> list[tuple[str, list[str]]]:
    """(qualifier text, names) per table row (first column) or per list item (ds.<name>, ds.attrs[...])."""
    rows = []
    for line in body.splitlines():
        if line.startswith("|"):
            first = line.split("|")[1]
            if set(first.strip()) <= {"-", ":", ""} or first.strip() in ("variable", "attr"):
                continue
            rows.append((first, re.findall(r"`([^`]+)`", first)))
    if not rows and "`ds." in body:  # a list: ds.<name> and ds.attrs["<name>"]
        rows = [("", [a or b for a, b in re.findall(r'`ds\.(?:attrs\["(\w+)"\]|(\w+))`', body)])]
    elif not rows:  # a paragraph: every backticked identifier
        rows = [("", re.findall(r"`([A-Za-z_]\w*)`", body))]
    return rows


def _expand(name: str, ds) -> list[str]:
    if "<g>" in name:
        from metrics._figures.report import study_rate_variables

        return [name.replace("<g>", g) for g in study_rate_variables(ds)]
    if "<statistic>" in name:
        return [name.replace("<statistic>", s) for s in metrics.PHASE_STATISTICS if s in ds]
    if name in ("<metric>", "<diagnostic>"):
        return [v for v in ds.data_vars if v in metrics.METRICS or v in particles.DIAGNOSTICS]
    return [name]


def _documented(body, kind, ds) -> set:
    names = set()
    for qualifier, row in _rows(body):
        if ((r"S^1\)" in qualifier and kind != "limit-study-s1")
                or (r"S^{d-1}" in qualifier and kind != "limit-study-s2")):
            continue
        for name in row:
            names.update(_expand(name, ds))
    return names


def test_every_dataset_kind_is_documented():
    kinds = {k for p in SECTIONS for k in p.values[1] if not p.values[0]}
    assert kinds == set(MAKERS), set(MAKERS) ^ kinds
    assert {k for p in SECTIONS for k in p.values[1] if p.values[0]} == set(MAKERS)  # the provenance attrs


@pytest.mark.parametrize("attrs, kinds, body", SECTIONS)
def test_documented_names_match_the_datasets(attrs, kinds, body):
    problems = []
    for kind in kinds:
        ds = dataset(kind)
        documented = _documented(body, kind, ds)
        table = "|" in body  # a list (ds.<name>, ds.attrs[...]) names some variables and attrs: checked one way
        have = set(ds.attrs) if attrs else set(ds.data_vars) | (set() if table else set(ds.attrs))
        if missing := sorted(documented - have):
            problems.append(f"{kind}: documented but not in the dataset: {missing}")
        if not attrs and table and (undocumented := sorted(have - documented)):
            problems.append(f"{kind}: in the dataset but not documented: {undocumented}")
    assert not problems, "\n".join(problems)
    assert any(names for _, names in _rows(body)), "a marked section names nothing"
