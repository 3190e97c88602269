"""The rooms of ``metrics``, measured: each imports only its own room or lower ones, and no room takes
another room's private names (a name a room shares is public inside the package: no leading underscore).

Run as a script it prints the rooms, their modules and the arrows between rooms.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_architecture import ROOT, _modules, import_graph, private_imports  # noqa: E402

#: metrics' private rooms, lowest first; the public faces (``metrics``, ``metrics.io``, ...) sit on top
METRICS_ROOMS = {"_observables": 0, "_statistics": 1, "_data": 2, "_runs": 3, "_studies": 4, "_figures": 5}
FACE = len(METRICS_ROOMS)


def room(module: str) -> int | None:
    """The layer of a ``metrics`` module (None outside metrics)."""
    parts = module.split(".")
    if parts[0] != "metrics":
        return None
    return METRICS_ROOMS.get(parts[1], FACE) if len(parts) > 1 else FACE


def upward_arrows(graph) -> list[str]:
    return sorted(f"{mod} -> {dep}" for mod, deps in graph.items() if room(mod) is not None
                  for dep in deps if room(dep) is not None and room(dep) > room(mod))


def room_unit(module: str) -> str:
    """The unit a module belongs to for the private-import rule: its room inside metrics, else its package."""
    parts = module.split(".")
    if parts[0] == "metrics" and len(parts) > 1 and parts[1] in METRICS_ROOMS:
        return ".".join(parts[:2])
    return parts[0]


def private_names_across_rooms() -> list[str]:
    """Imports of another room's private modules or names, by the architecture test's own rule."""
    files = [(path, name) for path, name in _modules() if name.startswith("metrics.")]
    return private_imports(files, boundary=room_unit)


def test_every_metrics_module_is_in_a_room_or_a_face():
    loose = [p.name for p in (ROOT / "metrics").glob("*.py")
             if p.stem not in ("__init__", "extend", "io", "sentences", "spectral_reference")]
    assert loose == []


def test_metrics_rooms_import_downwards():
    assert upward_arrows(import_graph()) == []


def test_no_private_name_crosses_a_room():
    assert private_names_across_rooms() == []


if __name__ == "__main__":
    graph = import_graph()
    for name, layer in METRICS_ROOMS.items():
        mods = sorted(m.split(".")[2] for m in graph if m.startswith(f"metrics.{name}."))
        print(f"{layer} {name:13s} {len(mods):2d} modules: {', '.join(mods)}")
    arrows = {(room(m), room(d)) for m, ds in graph.items() for d in ds if room(m) is not None and room(d) is not None}
    print("room arrows:", sorted(a for a in arrows if a[0] != a[1]))
    print("upward:", upward_arrows(graph) or 0, " private names across rooms:", private_names_across_rooms() or 0)
