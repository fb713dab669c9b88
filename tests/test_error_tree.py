"""Every exception class lives in ``errors.py`` (or ``_errors_base.py``), drawn in its docstring.

The package's source is read with ``ast`` (classes nested in functions included), and each
class's bases are followed through the module's imports to decide whether it is an exception;
an exception class defined anywhere else fails, unless it is a private control-flow exception
listed below with its reason. The tree drawn in ``errors``'s docstring must name every class
there, each under its real parent.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import agents_state_ext
from agents_state_ext import errors

PACKAGE = Path(agents_state_ext.__file__).parent
HOMES = {"agents_state_ext.errors", "agents_state_ext._errors_base"}

ALLOWED = {
    "agents_state_ext.stores.urls._MissingDriver": (
        "private: open_store turns it into StoreError; a lazy backend import lets it out as the "
        "ImportError it is (with the extra to install)"
    ),
    "agents_state_ext.testing._items.ApiError": (
        "the mock server's error answer: raised by its request rules, turned into the HTTP "
        "response by its routes; never reaches a caller as an exception"
    ),
    "agents_state_ext.testing._admin.AdminError": (
        "the mock server's admin answer: raised and turned into an HTTP response in _admin"
    ),
}
"""Exception classes defined outside errors.py on purpose, each with why."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _parsed(module: str) -> tuple[dict[str, ast.ClassDef], dict[str, tuple[str, str | None]]]:
    """A package module's classes by name (any depth) and its imports: name -> (module, attr)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(path.read_text("utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    classes: dict[str, ast.ClassDef] = {}
    imports: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            classes.setdefault(node.name, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None)
                else:
                    imports[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                imports[alias.asname or alias.name] = (source, alias.name)
    return classes, imports


def _is_ours(module: str) -> bool:
    return module == "agents_state_ext" or module.startswith("agents_state_ext.")


def _external(module: str, attrs: list[str]) -> object:
    value: object = importlib.import_module(module)
    for attr in attrs:
        value = getattr(value, attr)
    return value


def _raises(module: str, expr: ast.expr) -> bool:
    """Whether the base ``expr`` (written in ``module``) is an exception class."""
    names: list[str] = []
    while isinstance(expr, ast.Attribute):
        names.insert(0, expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    head = expr.id
    classes, imports = _parsed(module)
    if not names and head in classes:
        return _is_exception(module, head)
    if head in imports:
        source, attr = imports[head]
        path = ([attr] if attr else []) + names
        if _is_ours(source) and path:
            target = f"{source}.{'.'.join(path[:-1])}".rstrip(".")
            if _is_ours(target) and _defines(target, path[-1]):
                return _is_exception(target, path[-1])
        value = _external(source, path)
    else:
        value = _external("builtins", [head, *names]) if hasattr(builtins, head) else None
    return inspect.isclass(value) and issubclass(value, BaseException)


def _defines(module: str, name: str) -> bool:
    try:
        classes, imports = _parsed(module)
    except FileNotFoundError:
        return False
    return name in classes or name in imports


@cache
def _is_exception(module: str, name: str) -> bool:
    classes, imports = _parsed(module)
    if name not in classes:
        source, attr = imports[name]
        if _is_ours(source) and attr and _defines(source, attr):
            return _is_exception(source, attr)
        return bool(attr) and issubclass(_external(source, [attr]), BaseException)  # type: ignore[arg-type]
    return any(_raises(module, base) for base in classes[name].bases)


def exception_classes() -> Iterator[str]:
    """``module.Name`` of every exception class the package's source defines."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for name in _parsed(module)[0]:
            if _is_exception(module, name):
                yield f"{module}.{name}"


def test_exception_classes_are_defined_only_in_errors() -> None:
    found = set(exception_classes())
    assert len([c for c in found if c.rpartition(".")[0] in HOMES]) > 30, "is the scan right?"
    outside = {c for c in found if c.rpartition(".")[0] not in HOMES}
    assert sorted(outside - set(ALLOWED)) == []
    assert sorted(set(ALLOWED) - outside) == []  # a listed class that moved or went away


def _drawn() -> dict[str, str | None]:
    """Each class the docstring draws, with its drawn parent (``None`` at the top)."""
    drawn: dict[str, str | None] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        if not line.startswith("    ") or not line.strip() or line.endswith(":"):
            continue
        text = line[4:]
        body = text.lstrip(" │├└─")
        name = body.split()[0] if body else ""
        if not name.isidentifier() or not name[0].isupper():
            continue
        depth = (len(text) - len(body)) // 4
        del stack[depth:]
        drawn[name] = stack[-1] if stack else None
        stack.append(name)
    return drawn


def test_the_docstring_draws_every_error_under_its_parent() -> None:
    homes = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ in HOMES
    }
    drawn = _drawn()
    assert sorted(homes - set(drawn)) == []
    assert sorted(set(drawn) - homes - {"UserWarning"}) == []
    for name, parent in drawn.items():
        if parent is not None:
            assert getattr(builtins, parent, None) in getattr(errors, name).__bases__ or (
                getattr(errors, parent, None) in getattr(errors, name).__bases__
            ), (name, parent)


def test_the_scan_follows_imports() -> None:
    assert _is_exception("agents_state_ext.errors", "ConversationLockedError")  # openai's base
    assert _is_exception("agents_state_ext.server.leases", "ConversationBusyError")  # imported
    assert not _is_exception("agents_state_ext._nodes", "Node")
