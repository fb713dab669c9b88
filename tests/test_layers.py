"""The package keeps its layers: no import upward, no import cycle (``tools/layers.py``).

Every import counts, lazy and ``TYPE_CHECKING`` ones included. ``KNOWN_UPWARD`` and
``KNOWN_CYCLES`` are the violations issue 30 has still to remove; each must still occur, so
the lists only shrink: remove an entry the moment its import is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.layers import LAYERS, Import, cycles, imports, layer_of, modules, upward

# (importer, imported): a lower layer importing a higher one, each with why it must go.
KNOWN_UPWARD: dict[tuple[str, str], str] = {
    ("_session_import", "chat.counts"): "issue 30: stored token counts move below the chat",
}

# Import cycles (strongly connected components), each with why it must go.
KNOWN_CYCLES: dict[frozenset[str], str] = {
    frozenset(
        {
            "chat.deps",
            "chat.held",
            "chat.records",
            "chat.session",
            "chat.strategy_base",
            "chat.writes",
        }
    ): "issue 30: the turn's values sit below the book and the strategies",
}


@pytest.fixture(scope="module")
def edges() -> list[Import]:
    return imports()


def test_every_module_is_in_exactly_one_layer() -> None:
    placed = {module: layer_of(module) for module in modules()}
    wrong = {module: layers for module, layers in placed.items() if len(layers) != 1}
    assert not wrong, f"place each module in one layer of tools/layers.py LAYERS: {wrong}"
    order = ["values", "context", "stores", "testing", "ledger", "owners", "state", "chat", "apps"]
    assert list(LAYERS) == order


def test_the_walk_sees_lazy_and_type_checking_imports(edges: list[Import]) -> None:
    pairs = {(edge.source, edge.target) for edge in edges}
    # cli/chat.py imports the testing kit under TYPE_CHECKING and again inside a function.
    assert ("cli.chat", "testing") in pairs
    lazy = Path(modules()["cli.chat"]).read_text()
    assert "if TYPE_CHECKING:\n    from ..testing import" in lazy
    assert "    from .inspect import pick_conversation" in lazy
    assert ("cli.chat", "cli.inspect") in pairs
    # Relative (`from ..chat import X`), absolute and package-level imports all resolve.
    assert ("cli.__init__", "__init__") not in pairs  # a package is named by its folder
    assert ("cli", "__init__") in pairs


def test_no_new_upward_import(edges: list[Import]) -> None:
    new = [
        f"{edge.source} ({layer_of(edge.source)[0]}) imports {edge.target} "
        f"({layer_of(edge.target)[0]}) at line {edge.line}"
        for edge in upward(edges)
        if (edge.source, edge.target) not in KNOWN_UPWARD
    ]
    assert not new, "imports of a higher layer by a lower one:\n" + "\n".join(new)


def test_every_known_upward_import_still_occurs(edges: list[Import]) -> None:
    found = {(edge.source, edge.target) for edge in upward(edges)}
    gone = [pair for pair in KNOWN_UPWARD if pair not in found]
    assert not gone, f"remove these from KNOWN_UPWARD, they no longer occur: {gone}"


def test_no_new_import_cycle(edges: list[Import]) -> None:
    new = [sorted(component) for component in cycles(edges) if component not in KNOWN_CYCLES]
    assert not new, f"import cycles (a shrunk known one: update KNOWN_CYCLES): {new}"


def test_every_known_cycle_still_occurs(edges: list[Import]) -> None:
    found = set(cycles(edges))
    gone = [sorted(component) for component in KNOWN_CYCLES if component not in found]
    assert not gone, f"update KNOWN_CYCLES, these cycles no longer occur as listed: {gone}"


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    chain = [Import("a", "b", 1), Import("b", "c", 1), Import("c", "a", 1), Import("c", "d", 1)]
    assert cycles(chain) == [frozenset({"a", "b", "c"})]
    assert cycles(chain[1:]) == []
