"""The package's rooms and the one-way flow between them, checked by walking imports.

Every ``import`` in the package is read with ``ast`` (those inside functions and
under ``TYPE_CHECKING`` too): a module may import its own room and rooms below
it, never one above or beside it, and no chain of imports leads back to where it
started. The sans-I/O core (protocol values and rules, the decoders, the block
sequencer) imports no I/O library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dsh_replay"

# Lower ranks are imported by higher ones, never the other way round. Rooms of
# one rank (the plugin and the command line) do not import each other either.
RANKS = {
    "dsh_replay._version": 0,
    "dsh_replay.errors": 0,
    "dsh_replay.protocol": 1,
    "dsh_replay.wire": 2,
    "dsh_replay.seed_config": 2,
    "dsh_replay.adapters": 3,
    "dsh_replay.cassette": 4,
    # serving and proxying for clients in any language, over the cassette engine's recorder and matcher
    "dsh_replay.server": 5,
    # the conformance suite serves its cases through the server to adapters in other languages
    "dsh_replay.conformance": 6,
    "dsh_replay.pytest_plugin": 7,
    "dsh_replay.cli": 7,
    "dsh_replay.testing": 8,
    "dsh_replay.__main__": 9,
    "dsh_replay": 10,
}

# the codec's load_jsonl also takes a path, as the spec asks; everything else here takes values
SANS_IO = (
    "dsh_replay.protocol.chunks",
    "dsh_replay.protocol.options",
    "dsh_replay.protocol.turn",
    "dsh_replay.protocol.violation",
    "dsh_replay.protocol.validator",
    "dsh_replay.protocol.validator_state",
    "dsh_replay.protocol.rules",
    "dsh_replay.protocol.block_rules",
    "dsh_replay.protocol.stream_rules",
    "dsh_replay.wire.sse",
    "dsh_replay.wire.ndjson",
    "dsh_replay.wire.sequencer",
)
IO_LIBRARIES = {"httpx", "asyncio", "pathlib", "socket", "os", "trio", "anyio"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path) -> set[str]:
    """The package modules (and outside top-level packages) that ``name`` imports."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # `from . import x` may name a submodule
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def room(name: str) -> str:
    """The entry of RANKS a module belongs to (the longest matching prefix)."""
    best = max((key for key in RANKS if name == key or name.startswith(key + ".")), key=len)
    return best


def package_graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {m for m in imports_of(name, path) if m in mods and m != name} for name, path in mods.items()}


def test_every_module_has_a_room() -> None:
    homeless = [name for name in modules() if room(name) == "dsh_replay" and name != "dsh_replay"]
    assert homeless == []


def test_no_upward_or_sideways_import() -> None:
    wrong = []
    for name, targets in package_graph().items():
        mine = room(name)
        for target in targets:
            theirs = room(target)
            if theirs == mine or target == "dsh_replay":
                # the package root is only ever imported for its submodules
                continue
            if RANKS[theirs] >= RANKS[mine]:
                wrong.append(f"{name} imports {target} ({mine} -> {theirs})")
    assert wrong == []


def test_no_import_cycle() -> None:
    graph = package_graph()
    # a package's __init__ is entered on the way to each of its submodules; the
    # root package itself only re-exports, so edges into it are not followed
    for targets in graph.values():
        targets.discard("dsh_replay")
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


@pytest.mark.parametrize("core", SANS_IO)
def test_sans_io_core_imports_no_io(core: str) -> None:
    offenders = []
    for name, path in modules().items():
        if name == core or name.startswith(core + "."):
            outside = {m.split(".")[0] for m in imports_of(name, path) if not m.startswith("dsh_replay")}
            offenders.extend(f"{name} imports {lib}" for lib in sorted(outside & IO_LIBRARIES))
    assert offenders == []


def test_modules_stay_small() -> None:
    # one module owns one thing: past ~400 lines it is probably two
    big = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 420}
    assert big == {}


def test_walker_sees_an_upward_import(tmp_path: Path) -> None:
    # the checks above can fail: an import of the plugin from the protocol room is caught
    fake = tmp_path / "dsh_replay" / "protocol" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..pytest_plugin import hooks\nif False:\n    from ..cassette.store import Cassette\n")
    found = imports_of("dsh_replay.protocol.x", fake)
    assert "dsh_replay.pytest_plugin.hooks" in found
    assert "dsh_replay.cassette.store" in found
    assert RANKS[room("dsh_replay.pytest_plugin.hooks")] > RANKS[room("dsh_replay.protocol.x")]
