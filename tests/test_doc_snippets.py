"""Every fenced code block of README.md and docs/ runs as pasted, each on its own.

- ``python``: executed in a fresh namespace, in a temporary working directory;
- ``bash``: run by ``bash -e`` in a temporary directory, with this interpreter's scripts first
  on PATH (so ``headflow`` is this checkout's); a block whose commands (comments aside) are
  those of a block that already ran is not run twice;
- ``toml``: a config of the command its first line names (``# headflow <command>``), loaded by
  :func:`headflow.cli.load_config` and equal to what ``headflow <command> --example`` prints;
- ``text``: a diagram or output listing, not code.

A block preceded by ``<!-- doc-test: skip (reason) -->`` is skipped with that reason (installs,
or runs that take minutes); :data:`MAX_SKIPPED` bounds how many there are.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
FENCE = re.compile(r"(?P<skip><!--\s*doc-test:\s*skip\s*(?P<reason>\(.*?\))?\s*-->\s*\n)?"
                   r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
LANGS = ("python", "bash", "toml", "text")
MAX_SKIPPED = 8
_BASH_DONE = set()  # command blocks (comments stripped) that already ran: README and the CLI guide share one


def _blocks():
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            line = text[:m.start("lang")].count("\n") + 1
            yield pytest.param(page, m["lang"], m["body"], m["skip"] is not None, (m["reason"] or "").strip("()"),
                               id=f"{page.relative_to(ROOT)}:{line}")


BLOCKS = list(_blocks())


def test_blocks_are_labelled_and_skips_are_few_and_explained():
    langs = [p.values[1] for p in BLOCKS]
    assert len(BLOCKS) > 20 and all(lang in LANGS for lang in langs), sorted(set(langs) - set(LANGS))
    skipped = [p for p in BLOCKS if p.values[3]]
    assert all(p.values[4] for p in skipped), "every skip marker gives a reason in parentheses"
    assert len(skipped) <= MAX_SKIPPED, [p.id for p in skipped]


@pytest.mark.parametrize("page, lang, body, skip, reason", BLOCKS)
def test_block_runs(page, lang, body, skip, reason, tmp_path, monkeypatch):
    if skip:
        pytest.skip(f"doc-test: skip ({reason})")
    monkeypatch.chdir(tmp_path)
    if lang == "text":
        return
    if lang == "python":
        import matplotlib

        matplotlib.use("Agg")
        code = compile(body, f"{page.name} block", "exec")
        exec(code, {"__name__": "__doc_snippet__"})
        import matplotlib.pyplot as plt

        plt.close("all")
    elif lang == "bash":
        commands = "\n".join(line.split("#")[0].rstrip() for line in body.splitlines() if "<<" not in body)
        if commands and commands in _BASH_DONE:
            return
        env = dict(os.environ, PATH=str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        out = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        _BASH_DONE.add(commands)
    elif lang == "toml":
        from headflow import cli

        first = body.splitlines()[0]
        command = re.match(r"# headflow (\w+)", first)
        assert command, f"a toml block starts with '# headflow <command>'; got {first!r}"
        cfg = cli.load_config(command[1], body)
        assert cli._public(cfg) == cli._public(cli.load_config(command[1], cli.EXAMPLES[command[1]]))
