"""The public surface: every contract name imports, and the layers point one way."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import relaystore
import relaystore.domain.sessions.records as domain_sessions
from relaystore import actors, domain, storage, testing
from tests.paths import ROOT

CONTRACT_DOC = ROOT / "docs" / "relaystore-api.md"
"""The contract: every name ``relaystore`` exports is shown there, in backticks."""


def _contract_table_names() -> set[str]:
    """The names in the first column of the contract's message and error tables."""
    names: set[str] = set()
    in_table = False
    for line in CONTRACT_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith(("| message |", "| error |")):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("|---"):
            first = line.split("|")[1]
            if "(`relaystore." not in first:  # a name the table says lives elsewhere
                names.update(re.findall(r"`([A-Z][A-Za-z]+)`", first.split("(")[0]))
    return names


CONTRACT_NAMES = relaystore.__all__
"""What ``relaystore`` exports: registered once, in ``relaystore._contract``."""

TEST_SEAMS = ["example_session"]
"""Test kit names (``relaystore.testing``) that no layer of the product may offer."""


def test_relaystore_all_is_the_contract() -> None:
    """``__all__`` is sorted, every name resolves, every name is shown in the contract
    (``docs/relaystore-api.md``), and every message and error its tables name is one."""
    assert relaystore.__all__ == sorted(relaystore.__all__)
    missing = [name for name in CONTRACT_NAMES if not hasattr(relaystore, name)]
    assert missing == []
    text = CONTRACT_DOC.read_text(encoding="utf-8").replace("```", "\n")
    spans = re.findall(r"`([^`\n]+)`", text)
    shown = {word for span in spans for word in re.findall(r"[A-Za-z_]+", span)}
    assert sorted(set(CONTRACT_NAMES) - shown) == []
    assert sorted(_contract_table_names() - set(CONTRACT_NAMES)) == []
    assert relaystore.EventStore.__module__ == "relaystore.actors.store"


def test_every_contract_name_imports() -> None:
    namespace: dict[str, object] = {}
    exec(f"from relaystore import {', '.join(CONTRACT_NAMES)}", namespace)
    assert all(namespace[name] is getattr(relaystore, name) for name in CONTRACT_NAMES)


def test_the_layer_packages_re_export_nothing() -> None:
    """The contract is exported once, by relaystore; layers import from modules."""
    for layer in (domain, storage, actors):
        assert layer.__all__ == []
        public = [name for name in vars(layer) if not name.startswith("_")]
        public = [name for name in public if name not in {"annotations", "logging"}]
        assert all(isinstance(getattr(layer, name), type(layer)) for name in public), public
        assert "Internal" in (layer.__doc__ or "")
    assert not hasattr(actors, "EventStore")


def test_no_layer_offers_a_test_seam() -> None:
    for seam in TEST_SEAMS:
        assert seam not in domain.__all__
        assert not hasattr(domain, seam)
        assert not hasattr(domain_sessions, seam)
        assert seam not in relaystore.__all__
        assert hasattr(testing, seam)  # the test kit has it instead


def test_every_error_derives_from_store_error() -> None:
    for name in [
        "InvalidInput",
        "RelayChainError",
        "ProjectionError",
        "SchemaMismatch",
        "UnknownSession",
        "LifecycleConflict",
        "WriterStopped",
        "WorkerLost",
        "StoreClosed",
        "StoreLocked",
        "StoreBusy",
        "StoreForked",
        "AskTimeout",
        "RequestUnanswered",
        "UnknownRelayKind",
    ]:
        assert issubclass(getattr(relaystore, name), relaystore.StoreError)


_LAYERS = {"domain": ROOT / "domain", "storage": ROOT / "storage", "actors": ROOT / "actors"}
_ALLOWED = {
    "domain": {"msgspec", "relaystore.domain"},
    "storage": {"msgspec", "apsw", "relaystore.domain", "relaystore.storage"},
    "actors": {
        "msgspec",
        "pykka",
        "tqdm",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "prometheus_client",
        "nats",  # relaystore[nats]: publish, fleet (imported where used)
        "relaystore.domain",
        "relaystore.storage",
        "relaystore.actors",
    },
}


@pytest.mark.parametrize("layer", sorted(_LAYERS))
def test_every_layer_module_lists_its_names(layer: str) -> None:
    """Each module of a layer declares ``__all__``, and every listed name exists."""
    wrong = []
    for path in sorted(_LAYERS[layer].rglob("*.py")):
        module_name = "relaystore." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module_name = module_name.removesuffix(".__init__")
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None)
        if names is None:
            wrong.append(f"{module_name}: no __all__")
        else:
            wrong.extend(f"{module_name}: {name}" for name in names if not hasattr(module, name))
    assert wrong == []


def _package(path: Path) -> list[str]:
    """The installed package a layer file belongs to (``actors/journal/x.py``:
    ``relaystore.actors.journal``)."""
    return ["relaystore", *path.relative_to(ROOT).parent.parts]


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module a file imports, relative imports resolved to their installed name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            base = _package(path)[: len(_package(path)) - node.level + 1]
            yield node.lineno, ".".join([*base, *([node.module] if node.module else [])])


def _third_party(module: str) -> str:
    if module.startswith("relaystore."):
        return ".".join(module.split(".")[:2])
    return module.split(".")[0]


@pytest.mark.parametrize("layer", sorted(_LAYERS))
def test_layers_import_only_what_is_below_them(layer: str) -> None:
    """domain is pure, storage adds apsw, actors adds pykka and never touches apsw."""
    stdlib = sys.stdlib_module_names
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(_LAYERS[layer].rglob("*.py"))
        for line, module in _imports(path)
        if (_third_party(module) not in _ALLOWED[layer] and module.split(".")[0] not in stdlib)
        or module.split(".")[0] in {"domain", "storage", "actors"}
    ]
    assert wrong == []


_SOURCES = {"relaystore": ROOT / "src" / "relaystore"} | {
    f"relaystore.{layer}": folder for layer, folder in _LAYERS.items()
}
"""Where the relaystore package's modules are: its public package and the layer folders."""


def _modules() -> dict[str, Path]:
    """Every module of the relaystore package by its installed name, and its file."""
    found = {}
    for package, folder in _SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            name = ".".join([package, *path.relative_to(folder).with_suffix("").parts])
            found[name.removesuffix(".__init__")] = path
    return found


def _package_of(name: str, path: Path) -> str:
    """The package a module's relative imports start from (a package's own, for its
    ``__init__``)."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imported_from(package: str, node: ast.ImportFrom) -> str:
    """The installed name of the module a ``from`` import reads (a relative one resolved
    from ``package``)."""
    base = node.module or ""
    if not node.level:
        return base
    parts = package.split(".")
    return ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])


class _RunImports(ast.NodeVisitor):
    """The relaystore modules one module imports when its code runs, with the line and
    whether the import is inside a function; an import under ``if TYPE_CHECKING`` never
    runs and is left out."""

    def __init__(self, name: str, path: Path, modules: dict[str, Path]) -> None:
        self.found: list[tuple[str, int, bool]] = []
        self._name = name
        self._package = _package_of(name, path)
        self._modules = modules
        self._depth = 0
        self.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _imported_from(self._package, node)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            self._add(submodule if submodule in self._modules else base, node.lineno)

    def _add(self, target: str, line: int) -> None:
        while target and target not in self._modules:  # a name inside a module
            target = target.rpartition(".")[0]
        edge = (target, line, self._depth > 0)
        if target and target != self._name and edge not in self.found:
            self.found.append(edge)


def _import_cycles() -> list[str]:
    """Each import cycle among relaystore's modules (a strongly connected set), worded as
    its imports (``module:line -> module``, marked when inside a function)."""
    modules = _modules()
    edges = {name: _RunImports(name, path, modules).found for name, path in modules.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(name: str) -> None:  # Tarjan's strongly connected components
        order[name] = low[name] = len(order)
        stack.append(name)
        for target, _, _ in edges[name]:
            if target not in order:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], order[target])
        if low[name] == order[name]:
            members: set[str] = set()
            while name not in members:
                members.add(stack.pop())
            if len(members) > 1:
                cycles.append(
                    ", ".join(
                        f"{source}:{line} -> {target}" + (" (inside a function)" * inside)
                        for source in sorted(members)
                        for target, line, inside in edges[source]
                        if target in members
                    )
                )

    for name in modules:
        if name not in order:
            visit(name)
    return cycles


def test_no_import_cycle_hides_in_a_function() -> None:
    """relaystore's modules import one another without a cycle, counting the imports
    inside functions: an import deferred into a function (``from ..core import
    StoreCore`` when first used) hides a cycle, it does not break it. Hand the lower
    module what it needs instead (a callable, a Protocol). The module-level imports are
    acyclic too, so any cycle at all fails."""
    assert _import_cycles() == []


def _defined_names(path: Path) -> set[str]:
    """The names a module defines at its top level (also under a top-level ``if`` or
    ``try``): its classes, functions and assignments, not what it imports."""
    found: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(
                name.id
                for target in targets
                for name in ast.walk(target)
                if isinstance(name, ast.Name)
            )
        elif isinstance(node, ast.If):
            body.extend([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            body.extend([*node.body, *node.orelse, *node.finalbody])
            body.extend(child for handler in node.handlers for child in handler.body)
    return found


_CATALOGUE = "relaystore.domain.relay"
"""The relay catalogue: the public path of every relay name, defining none itself."""


def test_relay_names_are_imported_from_their_home() -> None:
    """A relaystore module imports a relay name from the module that defines it (``from
    ..relay.events import RelayEvent``), never through the catalogue
    ``relaystore.domain.relay``, which only gathers the names under one public path
    (tests and users may read them there): a name imported from a package must be
    defined there (or be one of its modules)."""
    modules = _modules()
    defined = _defined_names(modules[_CATALOGUE])
    wrong = [
        f"{name}:{node.lineno}: {alias.name}"
        for name, path in modules.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and _imported_from(_package_of(name, path), node) == _CATALOGUE
        for alias in node.names
        if alias.name not in defined and f"{_CATALOGUE}.{alias.name}" not in modules
    ]
    assert wrong == []


_ONE_MEANING_MANY_HOMES = {
    "logger": "each module's own logging.getLogger(__name__)",
    "main": "a process's entry point: the command line's, a projection worker's",
    "register": "each command module's hook that adds its subcommands to the parser",
    "P": "a type variable: a parameter of its own module's generic functions",
    "R": "a type variable: a parameter of its own module's generic functions",
    "T": "a type variable: a parameter of its own module's generic functions",
}
"""The names several modules define on purpose, each for the same kind of thing."""


def test_a_name_means_one_thing() -> None:
    """No two relaystore modules define the same top-level name (a class, a function or
    an assignment, public or private; dunder names aside), so a name read in a
    traceback, a grep or a review means one thing: a second ``HistoryStart`` or
    ``UnknownSession`` is named for what it is instead, and one rule twice is one rule
    imported. Imports are not definitions; the few names defined on purpose in many
    modules are listed above, each with its reason."""
    homes: dict[str, list[str]] = {}
    for module, path in _modules().items():
        for name in _defined_names(path):
            if not (name.startswith("__") and name.endswith("__")):
                homes.setdefault(name, []).append(module)
    twice = {name: found for name, found in homes.items() if len(found) > 1}
    assert {
        name: found for name, found in twice.items() if name not in _ONE_MEANING_MANY_HOMES
    } == {}
    assert sorted(_ONE_MEANING_MANY_HOMES) == sorted(twice)  # the list holds only what is needed


def _absolute_relaystore_imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.split(".")[0] == "relaystore" for name in names):
            yield f"{node.lineno}: {ast.unparse(node)}"


def test_layer_folders_import_each_other_relatively() -> None:
    """An import between the layer folders names the folder it opens (``from ..domain.chain
    import advance``), not the installed path ``relaystore.domain`` that has no folder of
    that name in the tree."""
    wrong = [
        f"{path.relative_to(ROOT)}:{found}"
        for layer in sorted(_LAYERS)
        for path in sorted(_LAYERS[layer].rglob("*.py"))
        for found in _absolute_relaystore_imports(path)
    ]
    assert wrong == []


def test_domain_does_no_io() -> None:
    """The pure layer opens no files, sockets, threads or processes."""
    banned = {"threading", "socket", "subprocess", "multiprocessing", "sqlite3", "os", "io"}
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(_LAYERS["domain"].rglob("*.py"))
        for line, module in _imports(path)
        if module.split(".")[0] in banned
    ]
    assert wrong == []


_STORAGE_MAY_BUILD_EVENTS = {
    "events.py": "it wraps the rows it reads",
    "migrations.py": "migrations rewrite old bodies",
}


def test_storage_builds_no_event_the_domain_did_not_decide() -> None:
    """Storage executes, the domain decides: no storage module builds an API event
    (``Api....of(...)``) except to wrap a row it read or to migrate an old body."""
    wrong = []
    for path in sorted(_LAYERS["storage"].rglob("*.py")):
        if path.name in _STORAGE_MAY_BUILD_EVENTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "of"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id.startswith("Api")
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.value.id}.of")
    assert wrong == []


def test_the_contract_names_are_registered_once() -> None:
    """``relaystore._contract`` is the one list: one ``Name as Name`` import a name (what
    type checkers read), nothing else; ``relaystore`` offers exactly those, lazily."""
    tree = ast.parse((ROOT / "src" / "relaystore" / "_contract.py").read_text())
    registered: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert all(alias.asname == alias.name for alias in statement.names)
        registered.extend(alias.name for alias in statement.names)
    assert len(registered) == len(set(registered))
    assert sorted({*registered, "__version__"}) == relaystore.__all__
    init = ast.parse((ROOT / "src" / "relaystore" / "__init__.py").read_text())
    code = ast.unparse([node for node in init.body if not isinstance(node, ast.Expr)])
    assert [name for name in registered if re.search(rf"\b{name}\b", code)] == []
    assert "NoSuchName" not in dir(relaystore)
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = relaystore.NoSuchName  # type: ignore[attr-defined]
