"""mkdocs hook: the page ``tutorial.md``, rendered at build time from the executed notebook
``docs/tutorial.ipynb`` (markdown cells as they are, code cells as Python blocks, their outputs as
text, HTML tables and images). Reads the notebook's JSON with the standard library: no notebook
package, no kernel, nothing executed, so the build stays offline and fast. The executed copy is
refreshed by ``HEADFLOW_UPDATE_NOTEBOOK=1 python -m pytest -m slow tests/test_notebook.py``.
"""

from __future__ import annotations

import base64
import json
import pathlib

from mkdocs.structure.files import File

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "tutorial.ipynb"
_IMAGES = {"image/png": "png", "image/gif": "gif"}


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _outputs(cell: dict, index: int, files, config) -> list[str]:
    parts = []
    for k, out in enumerate(cell.get("outputs", [])):
        if out["output_type"] == "stream":
            parts += ["```text", _text(out["text"]).rstrip(), "```", ""]
            continue
        if out["output_type"] == "error":  # an executed copy with an error is refused by tests/test_notebook.py
            parts += ["```text", f"{out['ename']}: {out['evalue']}", "```", ""]
            continue
        data = out.get("data", {})
        image = next((mime for mime in _IMAGES if mime in data), None)
        if image is not None:
            uri = f"img/tutorial/cell{index}_{k}.{_IMAGES[image]}"
            files.append(File.generated(config, uri, content=base64.b64decode(_text(data[image]))))
            parts += [f"![output of cell {index}]({uri})", ""]
        elif "text/html" in data:
            parts += ['<div class="notebook-output">', _text(data["text/html"]).strip(), "</div>", ""]
        elif "text/plain" in data:
            parts += ["```text", _text(data["text/plain"]).rstrip(), "```", ""]
    return parts


def on_files(files, config):
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    parts = []
    for index, cell in enumerate(nb["cells"]):
        source = _text(cell["source"]).rstrip()
        if cell["cell_type"] == "markdown":
            parts += [source, ""]
            if index == 0:
                parts += ["The notebook: [tutorial.ipynb](tutorial.ipynb) (run it with `pip install -e .[notebook]`; "
                          "this page is its executed copy).", ""]
        elif cell["cell_type"] == "code":
            parts += ["```python", source, "```", ""]
            parts += _outputs(cell, index, files, config)
    files.append(File.generated(config, "tutorial.md", content="\n".join(parts)))
    return files
