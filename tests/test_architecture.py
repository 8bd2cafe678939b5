"""The module graph (issue 12): no import cycles, including imports inside functions, and a
light ``import perfsim``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "perfsim"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("perfsim", *path.relative_to(PACKAGE).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Every ``import``/``from ... import`` of a perfsim module, at any depth; ``from
    package import submodule`` counts as importing the submodule."""
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("perfsim"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name.startswith("perfsim"))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycles():
    graph = _graph(_modules())
    assert len(graph) > 30
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_import_perfsim_stays_light():
    code = ("import sys, perfsim; print(','.join(m for m in ('sympy', 'pandas', 'matplotlib', "
            "'perfsim.validate', 'perfsim.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""


def test_perfsim_gpus_loads_neither_numpy_nor_the_algorithms():
    """``perfsim gpus`` builds only its own command (issue 14's start-up): the package's names
    load on first use, and the CLI imports one command module."""
    code = ("import sys, io, contextlib\nfrom perfsim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['gpus'])\n"
            "print(','.join(m for m in ('numpy', 'perfsim.algorithms', 'perfsim.predict', "
            "'pandas', 'sympy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""


def test_every_public_function_has_a_docstring():
    missing = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            scopes = [(node, "")]
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                scopes += [(sub, f"{node.name}.") for sub in node.body]
            for item, prefix in scopes:
                if isinstance(item, (ast.FunctionDef, ast.ClassDef)) and \
                        not item.name.startswith("_") and not ast.get_docstring(item):
                    missing.append(f"{name}: {prefix}{item.name}")
    assert missing == []


def test_long_modules_say_why_they_are_long():
    """Issue 12: no module in perfsim/ over ~300 lines without a reason in its docstring (a
    paragraph starting "Length:")."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "perfsim"
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") <= 300:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        assert "\nLength: " in "\n" + doc, f"{path.relative_to(root)}: no 'Length:' reason"


def layers(graph: dict[str, set[str]]) -> list[str]:
    """``layer N: a, b, ...`` lines: a module's layer is the longest import chain below it."""
    memo: dict[str, int] = {}

    def layer(m: str) -> int:
        if m not in memo:
            deps = [d for d in graph.get(m, ()) if d in graph and d != m]
            memo[m] = 1 + max(map(layer, deps)) if deps else 0
        return memo[m]

    by: dict[int, list[str]] = {}
    for m in graph:
        by.setdefault(layer(m), []).append(m.removeprefix("perfsim."))
    return [f"layer {k}: {', '.join(sorted(by[k]))}" for k in sorted(by)]


def test_the_documented_module_graph_is_current():
    """docs/architecture.md lists the layers this graph has (regenerate with ``layers``)."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    listed = [line for line in doc.splitlines() if line.startswith("layer ")]
    assert listed == layers(_graph(_modules()))
