"""mkdocs hook: a gallery page for every script in ``examples/``, generated at build time.

Each page shows the example's docstring, how to run it and its source, so the gallery can
never drift from the scripts. With ``HEADFLOW_GALLERY_RUN=1`` the hook also runs every example
with ``--quick`` and embeds the tables and figures it writes (about a minute on one core);
without it the build stays fast and needs no computation.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
RUN = os.environ.get("HEADFLOW_GALLERY_RUN", "") not in ("", "0")
_TMP: list[pathlib.Path] = []  # example output folders, removed after the build


def _doc(path: pathlib.Path) -> tuple[str, str]:
    doc = ast.get_docstring(ast.parse(path.read_text())) or path.stem
    title, _, body = doc.partition("\n")
    # plain-text docstrings: "[--workers 2]" would parse as a Markdown reference link (a strict build error)
    body = body.strip().replace("[", "\\[").replace("]", "\\]")
    return title.strip().rstrip("."), body


def _run(path: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run([sys.executable, str(path), "--quick", "--out", str(out)], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    return sorted(out.iterdir())


def on_config(config):
    nav = config["nav"]
    for i, item in enumerate(nav):
        if isinstance(item, dict) and "Gallery" in item:
            nav[i] = {"Gallery": ["gallery/index.md"] + [{_doc(p)[0]: f"gallery/{p.stem}.md"} for p in EXAMPLES]}
    return config


def on_files(files, config):
    rows = []
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="headflow-gallery-")) if RUN else None
    if tmp is not None:
        _TMP.append(tmp)
    for path in EXAMPLES:
        title, body = _doc(path)
        rel = path.relative_to(ROOT).as_posix()
        rows.append(f"| [{path.stem}]({path.stem}.md) | {title} |")
        parts = [f"# {title}", "", body, "", "Run it (writes its tables and figures into `--out`; `--quick` "
                 "gives small sizes):", "", "```bash", f"python {rel} --out outputs", "```", ""]
        if RUN:
            parts += ["## Output of `--quick`", ""]
            for out in _run(path, tmp / path.stem):
                if out.suffix == ".png":
                    uri = f"gallery/img/{path.stem}/{out.name}"
                    files.append(File.generated(config, uri, content=out.read_bytes()))
                    parts += [f"![{out.stem}](img/{path.stem}/{out.name})", ""]
                elif out.suffix == ".md":
                    parts += [f"`{out.name}`:", "", out.read_text(), ""]
        parts += ["## Source", "", f"`{rel}`:", "", "```python", path.read_text().rstrip(), "```", ""]
        files.append(File.generated(config, f"gallery/{path.stem}.md", content="\n".join(parts)))
    index = ["# Gallery", "", "Every script in `examples/` checks a statement of the [theory](../theory.md) "
             "against simulation and writes tables, figures (PNG) and, for the studies, a netCDF dataset into "
             "`--out`. Build the docs with `HEADFLOW_GALLERY_RUN=1 mkdocs build` to embed the output of each "
             "example's `--quick` run.", "", "| example | what it shows |", "|---|---|", *rows, ""]
    files.append(File.generated(config, "gallery/index.md", content="\n".join(index)))
    return files


def on_post_build(config):
    while _TMP:
        shutil.rmtree(_TMP.pop(), ignore_errors=True)
