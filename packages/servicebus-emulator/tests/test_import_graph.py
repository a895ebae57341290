"""The emulator's import graph, read from its source (no module is imported): no import cycle
inside src/servicebus_emulator, and no import of the app or of the repository's other packages.

Every import statement counts: at module level, inside a function, and under
``if TYPE_CHECKING:`` (a module that names another only for its types still depends on it).
A failure lists each cycle as the chain of imports that closes it, module and line.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
EMULATOR = "servicebus_emulator"

# The app and the repository's other packages: the emulator serves any app and imports none.
FORBIDDEN = (
    "shared",
    "function_app",
    "spark_jobs",
    "localdev",
    "functions_local_host",
    "tests",
    "tools",
    "bench",
)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def modules(package: str, root: Path) -> dict[str, Path]:
    """Every module of ``package`` (found under ``root``) by dotted name."""
    folder = root.joinpath(*package.split("."))
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> list[Import]:
    """Every import in one module, as absolute module names (a ``from x import y`` is an import
    of ``x.y`` when that is a module of ``known``, else of ``x``)."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.append(Import(name, child if child in known else base, node.lineno))
    return found


def graph(package: str, root: Path) -> dict[str, list[Import]]:
    """The imports between the modules of ``package``, by importing module."""
    found = modules(package, root)
    known = set(found)
    return {
        name: [i for i in imports(name, path, known) if i.target in known]
        for name, path in found.items()
    }


def cycles(edges: dict[str, list[Import]]) -> list[tuple[list[Import], set[str]]]:
    """Each group of modules that import one another (the strongly connected components,
    Tarjan's algorithm) with one shortest cycle through it, as the imports that close it;
    empty when the graph has none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in edges[node]:
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or any(e.target == node for e in edges[node]):
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [(shortest_cycle(edges, group), group) for group in groups]


def shortest_cycle(edges: dict[str, list[Import]], group: set[str]) -> list[Import]:
    start = min(group)
    came_by: dict[str, Import] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in edges[node]:
            if edge.target not in group:
                continue
            if edge.target == start:
                chain = [edge]
                while chain[0].source != start:
                    chain.insert(0, came_by[chain[0].source])
                return chain
            if edge.target not in came_by:
                came_by[edge.target] = edge
                queue.append(edge.target)
    raise AssertionError(f"no cycle through {start}")  # a group always has one


def describe(cycle: list[Import], group: set[str], package: str) -> str:
    """``a -> b (line 3 of a) -> a (line 7 of b)``, names relative to ``package``, then the
    other modules of the group, if any."""

    def short(name: str) -> str:
        return name.removeprefix(f"{package}.")

    text = short(cycle[0].source) + "".join(
        f" -> {short(edge.target)} (line {edge.line} of {short(edge.source)})" for edge in cycle
    )
    others = sorted(short(name) for name in group - {edge.source for edge in cycle})
    return text + (f"; in the same circle: {', '.join(others)}" if others else "")


def forbidden(package: str, root: Path) -> list[Import]:
    """The imports of ``package`` that reach the app or another of the project's packages."""
    found = modules(package, root)
    known = set(found)
    return [
        i
        for name, path in found.items()
        for i in imports(name, path, known)
        if i.target.split(".")[0] in FORBIDDEN
        and i.target != package
        and not i.target.startswith(f"{package}.")
    ]


def test_the_emulator_has_no_import_cycle() -> None:
    edges = graph(EMULATOR, SRC)
    assert f"{EMULATOR}.broker" in edges, f"no emulator under {SRC}: where did it go?"

    found = cycles(edges)

    assert not found, "import cycles in the emulator:\n" + "\n".join(
        describe(cycle, group, EMULATOR) for cycle, group in found
    )


def test_the_emulator_imports_nothing_from_the_app_or_the_local_host() -> None:
    found = forbidden(EMULATOR, SRC)
    assert not found, "the emulator imports outside itself:\n" + "\n".join(map(str, found))


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_check_names_each_import_of_a_cycle(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "import typing\nif typing.TYPE_CHECKING:\n    from .c import C\n",
            "pkg/c.py": "def f():\n    from pkg.a import g\n",
            "pkg/d.py": "from .a import b\n",
            "pkg/e.py": "from . import a\nfrom pkg import f\n",
            "pkg/f.py": "import pkg.e\nimport pkg.g\n",
            "pkg/g.py": "from .e import x\n",
        },
    )

    found = cycles(graph("pkg", tmp_path))

    assert sorted(describe(cycle, group, "pkg") for cycle, group in found) == [
        "a -> b (line 1 of a) -> c (line 3 of b) -> a (line 2 of c)",
        "e -> f (line 2 of e) -> e (line 1 of f); in the same circle: g",
    ]


@pytest.mark.parametrize(
    "statement",
    ["import shared.domain", "from functions_local_host import x", "from .. import host"],
)
def test_the_check_names_an_import_of_the_app_or_the_host(tmp_path: Path, statement: str) -> None:
    write_package(
        tmp_path,
        {
            "localdev/__init__.py": "",
            "localdev/emu/__init__.py": "",
            "localdev/emu/m.py": statement,
        },
    )

    found = forbidden("localdev.emu", tmp_path)

    assert [(i.source, i.line) for i in found] == [("localdev.emu.m", 1)]
