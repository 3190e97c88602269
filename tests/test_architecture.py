"""The shape of the code, measured: import cycles, layers inside particles, function and module sizes,
kinds and geometries compared by name.

Run as a script (``python tests/test_architecture.py``), or after a pytest run of this file (the summary at
the end), it prints the measures against their targets. The limits: no
import cycle anywhere, every particles module imports only its own layer or lower ones, no
function over 60 lines of code, no module over 350 lines (and no line over 120 characters: ruff's
E501). Modules and functions that were over
a limit when it was set are listed in ``DEBT`` with their size then: they may shrink, never grow,
and a new one may not join them. An attention kind or a geometry is asked (its registry entry:
``model.attention.normalised``, ``model.geom.on_sphere``, a spectral discretisation's methods), never
compared by name outside its registry (``kind_comparisons``; target 0, 24 when it was set). ``meanfield`` is
at most ``MEANFIELD_FLOORS`` import floors deep (``floors``) and its modules import no private name from one
another (``sibling_private_names``). The validation is
one family within its line target; each study (a module declaring a ``Study``) is within its line target and
writes no settings name more than twice (``settings_writings``).
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("particles", "meanfield", "metrics", "headflow")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 350
#: particles' private layers, lowest first; a module may import its own layer and lower ones
PARTICLES_LAYERS = {"_core": 0, "_summation": 1, "theory": 1, "_model": 2, "_dynamics": 3, "_analysis": 4, "_kinds": 6,
                    "summation": 5, "validation": 5, "extend": 5, "events": 5, "__init__": 6}
#: over a limit when the limits were set: (kind, place) -> size then
DEBT: dict = {}


def _modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path, ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imports(path: pathlib.Path, name: str, modules) -> set[str]:
    """Modules of this repository imported by one file (relative imports resolved; ``from P
    import m`` of a submodule m depends on P.m, the package P being its parent anyway)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    parts = name.split(".")
    base = parts if is_pkg else parts[:-1]
    base = base[:-1] if is_pkg and parts[-1] == "__init__" else base
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names} & modules
            out.update(subs if subs else {mod})
    return {m for m in out if m.split(".")[0] in PACKAGES}


def import_graph() -> dict[str, set[str]]:
    names = {name.removesuffix(".__init__"): path for path, name in _modules()}
    graph = {}
    for name, path in names.items():
        graph[name] = {m for m in _imports(path, name, set(names)) if m in names and m != name}
    return graph


def cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "particles":
        return None
    return PARTICLES_LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def layering_violations(graph) -> list[str]:
    """particles modules importing a higher private layer (packages are ordered by test_layering.py)."""
    bad = []
    for mod, deps in graph.items():
        if _layer(mod) is None:
            continue
        for dep in deps:
            if dep != "particles" and _layer(dep) is not None and _layer(dep) > _layer(mod):
                bad.append(f"{mod} -> {dep}")
    return sorted(bad)


def top_level(module: str) -> str:
    """The default boundary: a module's top-level package (``particles._core.sphere`` -> ``particles``)."""
    return module.split(".")[0]


def subpackages_of(package: str):
    """A finer boundary: inside ``package`` each private subpackage (``metrics._a``) is its own unit,
    elsewhere the top-level package. ``private_imports(boundary=subpackages_of("metrics"))`` then also
    forbids ``metrics._b`` from importing a private module or name of ``metrics._a``."""

    def boundary(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == package and len(parts) > 1 and parts[1].startswith("_") \
            else parts[0]

    return boundary


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _imported(path: pathlib.Path, name: str):
    """(imported module, imported name or None) for every import statement of one file, relative
    imports resolved against the file's module ``name``."""
    parts = name.split(".")
    base = parts[:-1] if parts[-1] == "__init__" else (parts if path.name == "__init__.py" else parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            yield from ((mod, a.name) for a in node.names)


def private_imports(files=None, boundary=top_level) -> list[str]:
    """Imports that reach into another unit's privates: ``importer: target``.

    ``files`` are ``(path, module name)`` pairs (default: every module of the four packages; tests
    are not counted); ``boundary`` maps a module name to its unit (default: its top-level package).
    An import crosses when importer and target lie in different units; it is private when a part of
    the target's path below the target's unit, or the imported name, starts with one underscore
    (dunder names such as ``__version__`` are public). ``from P import m`` of a submodule ``m`` is
    judged as the module ``P.m``.
    """
    files = list(_modules()) if files is None else list(files)
    out = []
    for path, name in files:
        importer = name.removesuffix(".__init__")
        for mod, imported in _imported(path, name):
            if mod.split(".")[0] not in PACKAGES or boundary(mod) == boundary(importer):
                continue
            below = mod[len(boundary(mod)):].split(".")[1:]
            if any(map(_private, below)) or (imported is not None and _private(imported)):
                out.append(f"{importer}: {mod}" + (f".{imported}" if imported else ""))
    return sorted(out)


def floors(graph, package: str) -> int:
    """The import floors of a package: the number of modules on its longest chain of imports between its own
    modules (the package's ``__init__`` counted), so the fewest layers that order it with every import pointing
    down. Lazy imports inside functions count (they are arrows all the same)."""
    inside = {m: {d for d in deps if top_level(d) == package} for m, deps in graph.items() if top_level(m) == package}
    depth: dict[str, int] = {}

    def floor(module):
        if module not in depth:
            depth[module] = 1 + max((floor(d) for d in inside[module]), default=0)
        return depth[module]

    return max(map(floor, inside), default=0)


def modules_of(package: str):
    """A boundary that makes every module of ``package`` a unit of its own (elsewhere the top-level package):
    ``private_imports(boundary=modules_of("meanfield"))`` reports a private name one module takes from another."""

    def boundary(module: str) -> str:
        return module if top_level(module) == package else top_level(module)

    return boundary


#: meanfield's targets: at most 6 import floors (11 when set: meanfield -> stability -> flow -> spectral -> solve
#: -> discretise -> sphere -> sht -> zonal -> circle -> stepping) and no private name imported between its modules
#: (35 when set: the geometries borrowed each other's helpers)
MEANFIELD_FLOORS = 6


def sibling_private_names(package: str = "meanfield", files=None) -> list[str]:
    """Private names (one leading underscore) one module of ``package`` imports from another of its modules
    (``files``: ``(path, module name)`` pairs, default the package's modules; a private name of another package
    is the rule of ``private_imports`` across packages)."""
    files = [(path, name) for path, name in (_modules() if files is None else files) if top_level(name) == package]
    return [line for line in private_imports(files, boundary=modules_of(package))
            if top_level(line.split(": ")[1]) == package]


def test_meanfield_floors_and_sibling_private_names_within_targets():
    assert floors(import_graph(), "meanfield") <= MEANFIELD_FLOORS
    assert sibling_private_names() == []


def test_floors_and_sibling_names_measure_what_they_say(tmp_path):
    """The two measures on graphs and files written here."""
    graph = {"p": {"p.b", "q"}, "p.b": {"p.c", "q.x"}, "p.c": set(), "p.d": {"p.c"}, "q": {"p"}, "q.x": set()}
    assert floors(graph, "p") == 3 and floors(graph, "q") == 1
    files = {"meanfield.a": "from .b import _tool, tool\nfrom particles._core import _x\n",
             "meanfield.b": "from ._c import helper\n", "meanfield._c": "def helper():\n    pass\n"}
    pairs = []
    for name, text in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        pairs.append((path, name))
    assert sibling_private_names("meanfield", pairs) == ["meanfield.a: meanfield.b._tool"]  # (a module is no name)
    assert private_imports(pairs) == ["meanfield.a: particles._core._x"]  # (the rule across packages)


def _code_lines(lines, start, end, skip) -> int:
    return sum(1 for i in range(start, end + 1)
               if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def sizes() -> dict[tuple[str, str], int]:
    """Lines of every module over the module limit and code lines (no docstrings, comments or
    blank lines) of every function over the function limit."""
    out = {}
    for path, _ in _modules():
        text = path.read_text()
        lines = text.splitlines()
        rel = path.relative_to(ROOT).as_posix()
        if len(lines) > MAX_MODULE_LINES:
            out[("module", rel)] = len(lines)
        tree = ast.parse(text)
        docs = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                docs.update(range(body[0].lineno, body[0].end_lineno + 1))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _code_lines(lines, node.lineno, node.end_lineno, docs)
                if n > MAX_FUNCTION_LINES:
                    out[("function", f"{rel}:{node.name}")] = n
    return out


#: the modules that define the kinds and geometries by name (their registries)
REGISTRIES = {"particles/_model/kinds.py", "particles/_core/sphere.py"}


def _named_by_registries() -> list[str]:
    from particles import GEOMETRIES
    from particles.extend import ATTENTION_KINDS

    return sorted(set(ATTENTION_KINDS) | set(GEOMETRIES) | {"circle", "zonal"})  # (+ the spectral geometries)


def kind_comparisons(files=None) -> list[str]:
    """``kind == "usa"``, ``geometry != "flat"``, ``model.kind in ("usa", ...)`` and the like: a kind
    or geometry name compared outside the registries (lines of ``files``, default every module)."""
    names = "|".join(_named_by_registries())
    subject = r"""(?:kind|geometry)(?:\(\))?["')\]]*"""
    pattern = re.compile(rf"""{subject}\s*(?:==|!=|(?:not\s+)?in\s*[(\[{{])\s*["']({names})["']"""
                         rf"""|["']({names})["']\s*(?:==|!=)\s*[\w.]*(?:kind|geometry)\b""")
    files = files if files is not None else [p for p, _ in _modules()]
    out = []
    for path in files:
        if path.relative_to(path.parents[1]).as_posix() in REGISTRIES:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line.split("#")[0]):
                out.append(f"{path.relative_to(path.parents[1]).as_posix()}:{i}: {line.strip()}")
    return out


def test_kinds_and_geometries_are_asked_not_compared(tmp_path):
    assert kind_comparisons() == []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text('a = model.kind == "usa"\nb = geometry != \'flat\'\nc = kind in ("softmax", "x")\n'
                             'd = "sphere" == self.geometry\ne = info.route == "circle"  # a summation route\n'
                             'f = model.attention.normalised  # kind == "usa" in a comment\n')
    assert [line.split(":")[1] for line in kind_comparisons([pkg / "m.py"])] == ["1", "2", "3", "4"]


#: the validation family: the constraint base and message form, the rules, the rules on data, declarations,
#: the array checkers, the check_* helpers and the command line's one rule of its own (1238 lines in six
#: files when it was counted, with a second family of CLI types); target: one family, under 1100 lines
VALIDATION = ("particles/_core/constraint.py", "particles/_core/params.py", "particles/_core/params_data.py",
              "particles/_core/declarations.py", "particles/_core/arrays.py", "particles/_core/validation.py",
              "headflow/_schema.py")
VALIDATION_TARGET = 1100
#: hand-written check_* calls outside the family: may shrink, never grow (a new rule goes in a declaration)
HELPER_CALLS_MAX = 50
_HELPERS = re.compile(r"\bcheck_(?:param|choice|bool|callable|instance|names)\(")


def validation_lines() -> int:
    return sum(len((ROOT / path).read_text().splitlines()) for path in VALIDATION)


def helper_calls() -> int:
    """Hand-written ``check_param``-style calls outside the validation family (each a one-line call of a
    constraint; a declared parameter needs none: 88 when counted)."""
    family = {ROOT / path for path in VALIDATION} | {ROOT / "particles" / "validation.py"}
    return sum(len(_HELPERS.findall(p.read_text())) for p, _ in _modules() if p not in family)


def test_validation_is_one_family_within_its_target():
    assert validation_lines() <= VALIDATION_TARGET, validation_lines()
    assert helper_calls() <= HELPER_CALLS_MAX, f"{helper_calls()} check_* calls: declare the parameter instead"
    import pytest

    from particles.validation import Interval, InvalidParameterError, Options, check_choice, check_param

    # one implementation: a helper's refusal is its constraint's, word for word
    pairs = ((lambda: check_param(-1.0, "x", "f", low=0.0), lambda: Interval(0).check(-1.0, "x", "f")),
             (lambda: check_choice("c", "x", ("a", "b"), "f"), lambda: Options("a", "b").check("c", "x", "f")))
    for helper, rule in pairs:
        messages = []
        for call in (helper, rule):
            with pytest.raises(InvalidParameterError) as info:
                call()
            messages.append(str(info.value))
        assert messages[0] == messages[1]


#: the studies: the modules of metrics/_studies that declare a Study (cells, a store, typed settings); the
#: references they measure against (reference, spectral_reference) and sentence_flow (one flow, no cells)
#: are not studies. Targets in lines: every study <= 250, the limit study <= 220 (342, 333 and 327 lines for
#: the limit, chaos and phase studies when the targets were set, with untyped settings)
STUDY_LINES_MAX = 250
STUDY_TARGETS = {"metrics/_studies/limit.py": 220}
#: a settings name is written at most twice in its study: once in the settings table (fields, rules, key
#: names and relations: one place) and once elsewhere; reading the typed settings (``s.t1``, or passing it on
#: as ``t1=s.t1``) is a use, not a writing
SETTINGS_WRITINGS_MAX = 2
#: settings names that also name something else in their study, with how many occurrences mean that
#: other thing (they are not writings of the setting; the count is exact, so a new writing still fails)
OTHER_MEANINGS = {
    ("metrics/_studies/chaos.py", "density"): (2, "the density's entry of the pinned cell key"),
    ("metrics/_studies/chaos.py", "delta"): (2, "the Dataset's delta coordinate"),
    ("metrics/_studies/phase.py", "chunk"): (4, "the Dataset's chunk dimension (3) and Ensemble's chunk parameter"),
}


def _settings_class(tree):
    return next((node for node in tree.body if isinstance(node, ast.ClassDef) and any(
        (getattr(b, "id", None) or getattr(b, "attr", None)) == "StudySettings" for b in node.bases)), None)


def study_modules() -> list[pathlib.Path]:
    """The modules of metrics/_studies with a module-level ``NAME = Study(...)`` (or ``kit.Study``)."""
    out = []
    for path in sorted((ROOT / "metrics" / "_studies").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            call = getattr(node, "value", None)
            if isinstance(node, ast.Assign) and isinstance(call, ast.Call) and \
                    (getattr(call.func, "id", None) or getattr(call.func, "attr", None)) == "Study":
                out.append(path)
                break
    return out


def settings_writings(path: pathlib.Path) -> dict[str, int]:
    """How many places of one study module write each name of its settings: the settings table (the class
    whose base is StudySettings) counts once; then every parameter, keyword argument (but ``t1=s.t1``, the
    typed setting passed on under its own name) and string constant (not docstrings or f-strings) that
    spells it."""
    tree = ast.parse(path.read_text())
    cls = _settings_class(tree)
    if cls is None:
        return {}
    count = {n.target.id: 1 for n in cls.body
             if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id != "_"}
    skip = {id(n) for n in ast.walk(cls)}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip.update(id(n) for n in ast.walk(node))  # a message
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.arg):
            name = node.arg
        elif isinstance(node, ast.keyword):
            passed_on = isinstance(node.value, ast.Attribute) and node.value.attr == node.arg
            name = None if passed_on else node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        else:
            continue
        if name in count:
            count[name] += 1
    rel = path.relative_to(path.parents[2]).as_posix()
    return {name: n - OTHER_MEANINGS.get((rel, name), (0,))[0] for name, n in count.items()}


def test_studies_within_their_targets():
    modules = {p.relative_to(ROOT).as_posix(): p for p in study_modules()}
    assert sorted(modules) == ["metrics/_studies/chaos.py", "metrics/_studies/limit.py", "metrics/_studies/phase.py"]
    for rel, path in modules.items():
        assert len(path.read_text().splitlines()) <= STUDY_TARGETS.get(rel, STUDY_LINES_MAX), rel


def test_no_settings_name_written_more_than_twice(tmp_path):
    for path in study_modules():
        over = {k: v for k, v in settings_writings(path).items() if v > SETTINGS_WRITINGS_MAX}
        assert not over, f"{path.name}: {over}"
    # the count itself, on a study written the old way: t1 in the table, a dict key, a keyword and a parameter
    (tmp_path / "metrics" / "_studies").mkdir(parents=True)
    old = tmp_path / "metrics" / "_studies" / "old.py"
    old.write_text('class S(StudySettings):\n    t1: float = setting(T1, 2.0)\n    dt: float = 0.1\n\n\n'
                   'def run(s, t1):\n    """t1 in a docstring is no writing"""\n'
                   '    key = {"t1": s.t1}\n    return f(t1=float(s.t1), dt=s.dt)\n')
    assert settings_writings(old) == {"t1": 4, "dt": 1}


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_particles_layers_import_downwards():
    assert layering_violations(import_graph()) == []


def test_no_private_import_across_packages():
    assert private_imports() == []


def test_private_imports_sees_units(tmp_path):
    """The rule itself, on files written here: a private module or name of another unit is reported,
    a public one is not; with subpackages_of("metrics") each metrics._x is a unit of its own."""
    files = {
        "meanfield.flow": "from particles._dynamics.steppers import Stepper\nfrom particles import simulate\n",
        "metrics._b.study": "from .._a.energy import _helper, energy\nfrom metrics._a import _private_mod\n",
        "metrics._a.energy": "from ._core import _tile\nfrom particles.extend import rows_per_block\n",
    }
    pairs = []
    for name, text in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        pairs.append((path, name))
    assert private_imports(pairs) == ["meanfield.flow: particles._dynamics.steppers.Stepper"]
    assert private_imports(pairs, subpackages_of("metrics")) == [
        "meanfield.flow: particles._dynamics.steppers.Stepper",
        "metrics._b.study: metrics._a._private_mod",
        "metrics._b.study: metrics._a.energy._helper",
    ]


def test_sizes_within_limits_or_shrinking_debt():
    over = sizes()
    new = {k: v for k, v in over.items() if k not in DEBT}
    grown = {k: (DEBT[k], v) for k, v in over.items() if k in DEBT and v > DEBT[k]}
    assert new == {} and grown == {}


def report() -> list[str]:
    """The measures against their targets, one line each (printed by the script and after a pytest run of
    this file)."""
    graph = import_graph()
    lines = [f"modules: {len(graph)}, import arrows: {sum(map(len, graph.values()))}",
             f"import cycles: {cycles(graph) or 0}",
             f"particles layering violations: {layering_violations(graph) or 0}",
             f"private imports across packages: {private_imports() or 0}",
             f"kind or geometry names compared outside their registries: {len(kind_comparisons())} (target 0; 24 "
             "before)",
             f"import floors: {', '.join(f'{pkg} {floors(graph, pkg)}' for pkg in PACKAGES)}",
             f"meanfield: {floors(graph, 'meanfield')} import floors (target <= {MEANFIELD_FLOORS}; 11 before), "
             f"{len(sibling_private_names())} private names imported between its modules (target 0; 35 before)"
             + "".join(f"\n  {line}" for line in sibling_private_names()),
             f"validation family: {validation_lines()} lines in {len(VALIDATION)} files (target <= "
             f"{VALIDATION_TARGET}; 1238 before); hand-written check_* calls outside it: {helper_calls()} "
             f"(<= {HELPER_CALLS_MAX}; 88 before)"]
    for path in study_modules():
        rel = path.relative_to(ROOT).as_posix()
        writings = settings_writings(path)
        most = max(writings.values())
        lines.append(f"study {rel}: {len(path.read_text().splitlines())} lines (target <= "
                     f"{STUDY_TARGETS.get(rel, STUDY_LINES_MAX)}); {len(writings)} settings names, each written at "
                     f"most {most} times (target <= {SETTINGS_WRITINGS_MAX}: "
                     f"{', '.join(n for n, k in writings.items() if k == most)})")
    lines.append(f"limits: functions <= {MAX_FUNCTION_LINES} code lines, modules <= {MAX_MODULE_LINES} lines")
    for (kind, where), n in sorted(sizes().items()):
        lines.append(f"  over: {kind:8s} {where:55s} {n:5d}" + ("  (debt)" if (kind, where) in DEBT else "  (NEW)"))
    return lines


if __name__ == "__main__":
    import sys

    sys.path[0] = str(ROOT)  # (the repository's packages, not tests/particles)
    print("\n".join(report()))
