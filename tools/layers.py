"""The package's layers, lowest first, and the imports between its modules.

``python -m tools.layers`` prints the layers, the upward imports and the import cycles.

A module may import its own layer and the layers below it, never one above, and no two modules
may import each other, however indirectly. ``tests/test_layers.py`` holds the package to that,
with no exception; docs/architecture.md describes the layers.
Every import counts: at module level, inside a function (lazy) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

PACKAGE = "agents_state_ext"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

# Module names relative to the package ("__init__" is the package itself; a subpackage is named
# by its folder, its modules as "folder.module"), as fnmatch patterns, each module in one layer.
LAYERS: dict[str, tuple[str, ...]] = {
    # Plain values and their rules: what a conversation, a request and an error are.
    "values": (
        "errors",
        "_errors_base",
        "types",
        "_ids",
        "_text",
        "_items",
        "_nodes",
        "_graph*",
        "_attempts",
        "_content",
        "_input_rules",
        "_reasoning",
        "_repairs",
        "_run_config",
        "_run_state_json",
        "_envelope",
        "_server_conversations",
        "_status",
        "_event_names",
    ),
    # Choosing what a request carries within a token budget, and counting the tokens.
    "context": ("_context*", "_tokens*"),
    # Where conversations are kept: the protocol, its backends and their conformance suite.
    "stores": ("stores", "stores.*"),
    # The testing kit (the mock Responses API, the fixed token counter): values and stores only.
    "testing": ("testing", "testing.*"),
    # The ledger of one run: what the server acknowledged, the run's lifecycle, the model layer.
    "ledger": (
        "_tracker",
        "_tracker_codec",
        "_open_calls",
        "_journal",
        "_acknowledged",
        "_dedupe",
        "_outbox",
        "_cursor",
        "_run",
        "_request",
        "_filter_match",
        "_model",
        "_model.*",
        "_reconcile",
        "_compat",
        "_filters",
        "_handoffs",
        "_owned",
        "_validation",
        "_compaction",
        "_tool_hooks",
        "_binding",
        "_carry",
        "_stored",
        "_tracing",
    ),
    # One owner per strategy (replay, session, previous_response, conversation).
    "owners": ("owners", "owners.*"),
    # ConversationState and what it does to a stored or serialized conversation.
    "state": (
        "_state",
        "_state_view",
        "_run_prep",
        "_persistence",
        "_rejection",
        "_session_import",
        "_session_export",
        "_session_urls",
        "_housekeeping",
    ),
    # The chat: a branching conversation over a store, turn by turn.
    "chat": ("chat", "chat.*"),
    # The applications on top: the HTTP server, the command line, the package's own surface.
    "apps": ("server", "server.*", "cli", "cli.*", "__init__", "__main__", "_agent_spec"),
}
RANK = {name: rank for rank, name in enumerate(LAYERS)}


@dataclass(frozen=True)
class Import:
    """One import of a package module by another, where it is written."""

    source: str
    target: str
    line: int


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its relative name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> list[str]:
    """The layers whose patterns name ``module`` (exactly one, for a placed module)."""
    return [
        layer
        for layer, patterns in LAYERS.items()
        if any(fnmatchcase(module, pattern) for pattern in patterns)
    ]


def _package_of(module: str, path: Path) -> list[str]:
    if module == "__init__":
        return []
    parts = module.split(".")
    return parts if path.name == "__init__.py" else parts[:-1]


def _named(node: ast.Import | ast.ImportFrom, package: list[str]) -> Iterator[tuple[str, str]]:
    """(dotted module, imported name or "") pairs, relative to the package, of one statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                yield alias.name[len(PACKAGE) + 1 :], ""
        return
    if node.level:
        base = package[: len(package) - node.level + 1]
        dotted = ".".join([*base, *([node.module] if node.module else [])])
    elif node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
        dotted = (node.module or "")[len(PACKAGE) + 1 :]
    else:
        return
    for alias in node.names:
        yield dotted, alias.name


def _resolve(dotted: str, name: str, known: Iterable[str]) -> str:
    """The module an import loads: ``from pkg import mod`` is ``pkg.mod``, else the nearest one."""
    names = set(known)
    candidate = f"{dotted}.{name}" if dotted and name else name or dotted
    if name and candidate in names:
        return candidate
    target = dotted
    while target and target not in names:
        target = target.rpartition(".")[0]
    return target or "__init__"


def imports(root: Path = ROOT) -> list[Import]:
    """Every import of one package module by another, lazy and ``TYPE_CHECKING`` ones too."""
    found = modules(root)
    edges: set[Import] = set()
    for module, path in found.items():
        package = _package_of(module, path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for dotted, name in _named(node, package):
                    target = _resolve(dotted, name, found)
                    if target != module:
                        edges.add(Import(module, target, node.lineno))
    return sorted(edges, key=lambda edge: (edge.source, edge.target, edge.line))


def upward(edges: Iterable[Import]) -> list[Import]:
    """The imports of a higher layer by a lower one (one per module pair, the first line)."""
    seen: dict[tuple[str, str], Import] = {}
    for edge in edges:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if len(source) == len(target) == 1 and RANK[target[0]] > RANK[source[0]]:
            seen.setdefault((edge.source, edge.target), edge)
    return list(seen.values())


def cycles(edges: Iterable[Import]) -> list[frozenset[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=sorted)


def main() -> None:
    edges = imports()
    for layer, patterns in LAYERS.items():
        names = [m for m in modules() if layer_of(m) == [layer]]
        print(f"{RANK[layer]} {layer}: {len(names)} modules ({', '.join(patterns)})")
    unplaced = [m for m in modules() if len(layer_of(m)) != 1]
    print(f"\nunplaced or placed twice: {unplaced or 'none'}")
    print("\nupward imports:")
    for edge in upward(edges):
        print(f"  {edge.source} -> {edge.target} (line {edge.line})")
    print("\nimport cycles:")
    for component in cycles(edges):
        print(f"  {', '.join(sorted(component))}")


if __name__ == "__main__":
    main()
