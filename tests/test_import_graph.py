"""The package's import graph has no circle, and its top level shows the layers.

Every ``import`` statement counts: those at module top, those inside functions and those under
``if TYPE_CHECKING:``. An import inside a function runs later, but it is the same dependency: placing it there
hides a loop from Python's import machinery, not from a reader following the code (issue 23 counts them). A
``TYPE_CHECKING`` import names a type the module's signatures speak of, so the module depends on that one too;
a loop through it is broken the same way, by moving the shared type to a module both can import.

Pure ``ast``: nothing is imported, so the test needs neither Spark nor Airflow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "ticdc_lakehouse"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: the modules allowed at the package's top level beside its packages (entry points a user or a tool names)
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py"}
#: at most this many top-level modules: the layers are packages (core/, runtime/, commands/, sim/, ...)
MAX_TOP_LEVEL_MODULES = 4


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    return {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of the package that the dotted ``name`` is or lies in (None: outside the package)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its text."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one, else a name of pkg
            names = [f"{source}.{alias.name}" for alias in node.names]
        for name in names:
            target = _resolve(name, modules)
            if target and target != module and not module.startswith(target + "."):
                found.add(target)  # a module's own ancestor packages are no dependency it adds
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): each module of one reaches all."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def one_loop(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """A shortest closed path from the component's first module back to it (breadth first inside it)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    return sorted(component)


#: circles another change of the same issue removes, each with that change; the test fails once one is gone, so its
#: entry is deleted with the change that broke it
PENDING: dict[frozenset[str], str] = {}


def _describe(graph: dict[str, set[str]], component: frozenset[str]) -> str:
    return f"{' -> '.join(one_loop(graph, component))} (modules in the circle: {', '.join(sorted(component))})"


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    found = circles(graph)
    new = [_describe(graph, component) for component in found if component not in PENDING]
    assert not new, f"{len(new)} import circle(s):\n" + "\n".join(new)
    gone = [" + ".join(sorted(component)) for component in PENDING if component not in found]
    assert not gone, f"circle(s) broken: delete their PENDING entry: {'; '.join(gone)}"


def test_the_graph_reader_sees_imports_inside_functions_and_type_checking(tmp_path):
    modules = {"ticdc_lakehouse.a": tmp_path / "a.py", "ticdc_lakehouse.b": tmp_path / "b.py",
               "ticdc_lakehouse.c": tmp_path / "c.py"}
    modules["ticdc_lakehouse.a"].write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ticdc_lakehouse.b import X\n"
        "def f():\n    from . import c\n")
    assert imports_of("ticdc_lakehouse.a", modules["ticdc_lakehouse.a"], modules) == {
        "ticdc_lakehouse.b", "ticdc_lakehouse.c"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [frozenset("abc")]
    assert one_loop(graph, frozenset("abc")) == ["a", "b", "c", "a"]


def test_the_top_level_holds_packages_and_a_few_entry_modules():
    modules = sorted(path.name for path in ROOT.glob("*.py"))
    extra = [name for name in modules if name not in TOP_LEVEL_MODULES]
    assert len(extra) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(extra)} modules at the top of {PACKAGE}/ ({', '.join(extra)}): each belongs in a layer package "
        "(core/, runtime/, commands/, sim/) or a stage package (decode/, landing/, merge/, iceberg/)")
