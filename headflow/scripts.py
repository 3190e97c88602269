"""Plumbing of headflow's scripts (the flagship, `examples/`): `--out DIR` and `--quick`, Markdown tables, figures."""

from __future__ import annotations

import argparse
import pathlib


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every script takes: ``--out DIR`` and ``--quick`` (also ``headflow flagship``'s)."""
    parser.add_argument("--out", default="outputs", help="output folder (default: outputs)")
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds; for the test-suite)")
    return parser


def parse(doc: str, argv=None):
    """``--out DIR`` and ``--quick`` for every example; returns (args, outdir)."""
    args = add_arguments(argparse.ArgumentParser(description=doc.strip().splitlines()[0])).parse_args(argv)
    outdir = pathlib.Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    return args, outdir


def write_table(path: pathlib.Path, header: list[str], rows: list[tuple]) -> str:
    """Write a Markdown table to ``path`` and return it (also printed by the caller)."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path) -> None:
    """tight_layout, write the PNG, and release the figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
