"""The wheel the bundle deploys declares every distribution its code imports: the job and the
shared modules it reaches, lazy imports included (a cluster has only what the wheel asks
for, plus pyspark). Imports under ``if TYPE_CHECKING:`` never run, so they are not followed."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ("shared", "spark_jobs")
RUNTIME = {"pyspark"}  # the Databricks runtime's


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield node
            for child in node.orelse:
                yield child
                yield from _run_time_nodes(child)
            continue
        yield node
        yield from _run_time_nodes(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(name: str, path: Path) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _run_time_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] in LOCAL or _is_namespace(module):
                # from package import submodule: a namespace package (opentelemetry) is in no
                # distribution of its own, its submodules are
                yield from (f"{module}.{alias.name}" for alias in node.names)
            if not _is_namespace(module):
                yield module


def _is_namespace(module: str) -> bool:
    if module.split(".")[0] in LOCAL:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    return spec is not None and spec.origin is None and bool(spec.submodule_search_locations)


def external_imports() -> set[str]:
    """Modules outside the repo and the standard library that the job's code imports."""
    todo = [f"spark_jobs.product_import.{p.stem}" for p in (ROOT / "spark_jobs").rglob("*.py")]
    seen: set[str] = set()
    external: set[str] = set()
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run
        for imported in _imports_of(name, path):
            top = imported.split(".")[0]
            if top in LOCAL:
                todo.append(imported)
            elif top not in sys.stdlib_module_names and top not in RUNTIME:
                external.add(imported)
    return external


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _owners() -> dict[Path, str]:
    owners = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.suffix == ".py":
                owners[Path(str(dist.locate_file(file))).resolve()] = _canonical(dist.name)
    return owners


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return _canonical(match.group(0))


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, their dependencies included (extras
    are not installed)."""
    found: set[str] = set()
    todo = [_requirement_name(r) for r in requirements]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requirements_of = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:  # a marker for another platform
            continue
        for requirement in requirements_of:
            if "extra ==" not in requirement:
                todo.append(_requirement_name(requirement))
    return found


def test_the_wheel_declares_every_distribution_its_code_imports() -> None:
    declared = tomllib.loads((ROOT / "spark_jobs" / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    owners = _owners()
    needed = {}
    for module in external_imports():
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin, f"{module} is not installed here"
        needed[module] = owners[Path(spec.origin).resolve()]

    installed = installed_by(declared)

    assert {m: d for m, d in needed.items() if d not in installed} == {}
    assert {"azure-identity", "azure-storage-blob", "azure-data-tables"} <= set(needed.values())
