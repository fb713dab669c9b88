"""The package keeps its layers: no import upward, no import cycle (``tools/layers.py``).

Every import counts, lazy and ``TYPE_CHECKING`` ones included; none is excused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.layers import LAYERS, Import, cycles, imports, layer_of, modules, upward


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


def test_no_upward_import(edges: list[Import]) -> None:
    found = [
        f"{edge.source} ({layer_of(edge.source)[0]}) imports {edge.target} "
        f"({layer_of(edge.target)[0]}) at line {edge.line}"
        for edge in upward(edges)
    ]
    assert not found, "imports of a higher layer by a lower one:\n" + "\n".join(found)


def test_no_import_cycle(edges: list[Import]) -> None:
    found = [sorted(component) for component in cycles(edges)]
    assert not found, f"import cycles: {found}"


def test_the_upward_finder_finds_an_upward_import() -> None:
    down = Import("chat.writes", "_nodes", 1)
    up = Import("_session_import", "chat.counts", 28)
    assert upward([down, up]) == [up]


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    chain = [Import("a", "b", 1), Import("b", "c", 1), Import("c", "a", 1), Import("c", "d", 1)]
    assert cycles(chain) == [frozenset({"a", "b", "c"})]
    assert cycles(chain[1:]) == []
