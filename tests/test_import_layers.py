"""The package's layer arrows, read from the source: every import counts, at module level, inside
functions and under TYPE_CHECKING alike (a type-only import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import odradek

ROOT = Path(odradek.__file__).parent


def _import_graph() -> dict[str, set[str]]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = ("odradek", *path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)
        # The longest known module each import names (``from pkg import mod`` names pkg.mod).
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


GRAPH = _import_graph()


def _cycles_through(prefixes: tuple[str, ...]) -> list[list[str]]:
    """Import cycles with a module under one of ``prefixes`` (depth-first search for back edges)."""
    found, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycle = path[path.index(target) :] + [target]
                if any(m.startswith(prefixes) for m in cycle):
                    found.append(cycle)
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    return found


def test_server_and_coordinator_have_no_import_cycles():
    assert _cycles_through(("odradek.server", "odradek.coordinator")) == []


def test_lower_layers_do_not_import_upper_ones():
    upward = {
        "odradek.server": ("odradek.cli",),
        "odradek.coordinator": ("odradek.server", "odradek.cli"),
        "odradek.replication": ("odradek.coordinator", "odradek.server", "odradek.cli"),
        "odradek.metrics": ("odradek.server", "odradek.cli"),
    }
    reaching_up = [
        (module, target)
        for module, targets in GRAPH.items()
        for layer, above in upward.items()
        if module.startswith(layer + ".")
        for target in targets
        if target.startswith(above)
    ]
    assert reaching_up == []


def test_metrics_counters_import_nothing_of_ours():
    """Every layer counts into metrics.stats (storage, replication, coordinator, server)."""
    assert GRAPH["odradek.metrics.stats"] == set()


def test_only_metrics_counters_are_imported_below_the_server():
    """Below the server, only the plain counters of metrics.stats may be used; the collectors
    read the broker's parts and sit above them."""
    lower = ("odradek.storage", "odradek.replication", "odradek.coordinator", "odradek.protocol")
    reaching = [
        (module, target)
        for module, targets in GRAPH.items()
        if module.startswith(lower)
        for target in targets
        if target.startswith("odradek.metrics") and target != "odradek.metrics.stats"
    ]
    assert reaching == []


def test_security_imports_nothing_of_ours():
    """The metadata stores keep ACL bindings and the server decides with them: the ACL types
    and the authorizer core sit below both."""
    security = {m: t for m, t in GRAPH.items() if m.startswith("odradek.security")}
    assert security
    assert {
        t for targets in security.values() for t in targets if not t.startswith("odradek.security")
    } == set()
