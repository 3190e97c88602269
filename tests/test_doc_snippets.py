"""Every fenced code block of README.md and docs/ runs as pasted, each on its own.

- ``python``: executed in a fresh namespace, in a temporary working directory;
- ``bash``: run by ``bash -e`` in a temporary directory, with this interpreter's scripts first
  on PATH (so ``headflow`` is this checkout's); a block whose commands (comments aside) are
  those of a block that already ran is not run twice;
- ``toml``: a config of the command its first line names (``# headflow <command>``), loaded by
  :func:`headflow.cli.load_config` and equal to what ``headflow <command> --example`` prints;
- ``text``: a diagram or output listing, not code.

A block preceded by ``<!-- doc-test: slow (reason) -->`` (installs into a fresh environment, or a
run of minutes) runs in :func:`test_slow_block_runs`, marked ``slow`` (``pytest -m slow``): bash
blocks in one fresh copy of this checkout, in page order, so that the README's install commands run
as a new user runs them (a command line that already ran there is not run twice); python blocks
like the others. No block is skipped.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
FENCE = re.compile(r"(?P<skip><!--\s*doc-test:\s*slow\s*(?P<reason>\(.*?\))?\s*-->\s*\n)?"
                   r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
LANGS = ("python", "bash", "toml", "text")
MAX_SLOW = 6
_BASH_DONE = set()  # command blocks (comments stripped) that already ran: README and the CLI guide share one


def _blocks():
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            line = text[:m.start("lang")].count("\n") + 1
            yield pytest.param(page, m["lang"], m["body"], m["skip"] is not None, (m["reason"] or "").strip("()"),
                               id=f"{page.relative_to(ROOT)}:{line}")


BLOCKS = list(_blocks())
FAST = [p for p in BLOCKS if not p.values[3]]
SLOW = [p for p in BLOCKS if p.values[3]]


def test_blocks_are_labelled_and_slow_ones_are_few_and_explained():
    text = "".join(page.read_text() for page in PAGES)
    assert "doc-test: skip" not in text, "no block is skipped: mark a long one 'doc-test: slow (reason)'"
    langs = [p.values[1] for p in BLOCKS]
    assert len(BLOCKS) > 20 and all(lang in LANGS for lang in langs), sorted(set(langs) - set(LANGS))
    assert all(p.values[4] for p in SLOW), "every slow marker gives a reason in parentheses"
    assert len(SLOW) <= MAX_SLOW and len(FAST) + len(SLOW) == len(BLOCKS), [p.id for p in SLOW]


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory):
    """A copy of this checkout's tracked files (what a clone of it holds), without any environment."""
    import shutil

    dest = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, files.stdout.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


_SLOW_LINES_DONE = set()


@pytest.mark.slow
@pytest.mark.parametrize("page, lang, body, skip, reason", SLOW)
def test_slow_block_runs(page, lang, body, skip, reason, fresh_checkout, tmp_path, monkeypatch):
    if lang != "bash":
        test_block_runs(page, lang, body, skip, reason, tmp_path, monkeypatch)
        return
    lines = [line for line in body.splitlines() if line.split("#")[0].strip()]
    todo = [line for line in lines if line.split("#")[0].strip() not in _SLOW_LINES_DONE]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(["bash", "-e", "-c", "\n".join(todo)], cwd=fresh_checkout, env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _SLOW_LINES_DONE.update(line.split("#")[0].strip() for line in todo)


@pytest.mark.parametrize("page, lang, body, skip, reason", FAST)
def test_block_runs(page, lang, body, skip, reason, tmp_path, monkeypatch):
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
