"""The import direction between layers, and no import cycle between modules (read from the source).

Every import counts, also the ones inside functions (a lazy import is still a dependency; it only
moves the moment it is paid). Layers, lowest first; a module may import its own layer and the
layers below, never above:

    foundation   dlzero.errors, dlzero.data.atomic, dlzero.data.regular, dlzero.version, dlzero.resources,
                 dlzero.cpu
    rules        dlzero.position, dlzero.game_end                (cshogi does the rules themselves)
    config       dlzero.config, dlzero.player_names, dlzero.gate_modes  (the schema; the grammars of player
                 names and of gate.mode, which the config checks and the gate reads)
    storage      dlzero.data, dlzero.runfiles, dlzero.rundir, dlzero.runlock, dlzero.networks, dlzero.chain
                 (file formats; the run directory's file names and columns, and its API; the shipped networks'
                 manifests; a loop chain's folder)
    encoding     dlzero.encoding
    model        dlzero.model
    inference    dlzero.inference
    search       dlzero.search
    engine       dlzero.engine, dlzero.usi, dlzero.analysis, dlzero.analysis_query, dlzero.review
    play         dlzero.play                                     (every game: the lockstep driver, players
                                                                  (alpha-beta, outside USI engines and their
                                                                  client too), rules profile, openings, the
                                                                  hcpe3 result and opening record)
    gating       dlzero.gating                                   (matches, SPRT, promotion, ratings, anchors)
    stages       dlzero.selfplay, dlzero.train, dlzero.teacher, dlzero.progress (self-play, training and
                 teacher: none imports another; selfplay/ and train/ install as dlzero.selfplay, dlzero.train)
    wiring       dlzero.loop, dlzero.loop_start, dlzero.commands, dlzero.cli, dlzero.bench, dlzero.dashboard,
                 dlzero.doctor, dlzero.usi.__main__, and the package itself (`dlzero/__init__.py`, the public facade)

A new module must be placed in a layer here (the test names any module it cannot place).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folders of the checkout and the package names they install as (pyproject.toml maps selfplay/ and train/)
PACKAGES = {"dlzero": "dlzero", "selfplay": "dlzero.selfplay", "train": "dlzero.train"}

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("dlzero.errors", "dlzero.data.atomic", "dlzero.data.regular", "dlzero.version", "dlzero.resources",
                    "dlzero.cpu")),
    ("rules", ("dlzero.position", "dlzero.game_end")),
    ("config", ("dlzero.config", "dlzero.player_names", "dlzero.gate_modes")),
    ("storage", ("dlzero.data", "dlzero.runfiles", "dlzero.rundir", "dlzero.runlock", "dlzero.networks",
                 "dlzero.chain")),
    ("encoding", ("dlzero.encoding",)),
    ("model", ("dlzero.model",)),
    ("inference", ("dlzero.inference",)),
    ("search", ("dlzero.search",)),
    ("engine", ("dlzero.engine", "dlzero.usi", "dlzero.analysis", "dlzero.analysis_query", "dlzero.review")),
    ("play", ("dlzero.play",)),
    ("gating", ("dlzero.gating",)),
    ("stages", ("dlzero.selfplay", "dlzero.train", "dlzero.teacher", "dlzero.progress")),
    ("wiring", ("dlzero.loop", "dlzero.loop_start", "dlzero.commands", "dlzero.cli", "dlzero.bench", "dlzero.dashboard",
                "dlzero.doctor", "dlzero.usi.__main__")),
]
FACADE = ("dlzero", len(LAYERS) - 1)  # the package's __init__ only, not everything below it
# Peers within one layer that must not import each other (by package prefix).
SEPARATE = {"stages": ("dlzero.selfplay", "dlzero.train", "dlzero.teacher")}
# Packages that must not import another, though the layers would allow it: the teacher plays and stores
# its games through play/ (players, USI client, rules, result byte) and has no business with gating.
APART = {"dlzero.teacher": ("dlzero.gating",)}


def _peer(module: str, peers: tuple[str, ...]) -> str | None:
    """The peer package among `peers` that `module` belongs to, if any."""
    return next((p for p in peers if module == p or module.startswith(p + ".")), None)


def _modules() -> dict[str, Path]:
    """Our modules by dotted name: the Python files, and the C sources of compiled extensions.

    An extension (`dlzero/search/_puct.c` builds `dlzero.search._puct`) is a module of its own that
    imports nothing of ours; without it an import of it would be read as one of its package.
    """
    mods = {}
    for folder, package in PACKAGES.items():
        for path in [*(ROOT / folder).rglob("*.py"), *(ROOT / folder).rglob("*.c")]:
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module (or package) of ours that `name` refers to, or None for third-party code."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Our modules that `module` imports anywhere in its source (none for a C extension)."""
    if MODULES[module].suffix == ".c":
        return set()
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name in `base`
        else:
            continue
        for name in names:
            owner = _owner(name)
            if owner is not None and owner != module:
                found.add(owner)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def _layer(module: str) -> int:
    """Index of the layer whose longest matching prefix covers `module` (-1: none)."""
    if module == FACADE[0]:
        return FACADE[1]
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def test_every_module_has_a_layer():
    assert MODULES, "no modules found"
    unplaced = sorted(m for m in MODULES if _layer(m) < 0)
    assert not unplaced, f"place these modules in a layer (LAYERS in tests/test_layers.py): {unplaced}"


def test_imports_point_down():
    wrong = []
    for module, deps in GRAPH.items():
        for dep in deps:
            if _layer(dep) > _layer(module):
                wrong.append(f"{module} ({LAYERS[_layer(module)][0]}) imports {dep} ({LAYERS[_layer(dep)][0]})")
            name = LAYERS[_layer(module)][0]
            if name in SEPARATE and _layer(dep) == _layer(module):
                peer_m, peer_d = _peer(module, SEPARATE[name]), _peer(dep, SEPARATE[name])
                if peer_m and peer_d and peer_m != peer_d:
                    wrong.append(f"{module} imports its peer stage {dep}")
    assert sorted(wrong) == []


def _apart_imports(graph: dict[str, set[str]]) -> list[str]:
    """The imports `APART` forbids."""
    return sorted(f"{module} imports {dep}" for module, deps in graph.items() for dep in deps
                  for package, banned in APART.items() if _peer(module, (package,)) and _peer(dep, banned))


def test_apart_packages_do_not_import_each_other():
    assert _apart_imports(GRAPH) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_the_checks_can_fail():
    """The checks find what they are for, on a made-up graph and a made-up upward import."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _layer("dlzero.search.mcts") < _layer("dlzero.selfplay.games") < _layer("dlzero.commands.selfplay")
    assert _layer("dlzero.search.mcts") < _layer("dlzero.play.driver") < _layer("dlzero.gating.match")
    assert _layer("dlzero.play.game") < _layer("dlzero.selfplay.worker")
    assert _layer("dlzero.usi.__main__") == len(LAYERS) - 1 and _layer("dlzero.usi.protocol") < len(LAYERS) - 1
    assert _owner("dlzero.search._puct.select") == "dlzero.search._puct"  # the extension, not its package
    assert _peer("dlzero.teacher.usi", SEPARATE["stages"]) == "dlzero.teacher"
    assert _peer("dlzero.progress", SEPARATE["stages"]) is None
    assert _apart_imports({"dlzero.teacher.usi": {"dlzero.gating.anchors", "dlzero.play.usi_client"}}) == [
        "dlzero.teacher.usi imports dlzero.gating.anchors"]


@pytest.mark.parametrize("module", ["dlzero.search.mcts", "dlzero.selfplay.games", "dlzero.commands.selfplay"])
def test_the_import_reader_sees_real_imports(module):
    assert "dlzero.config" in GRAPH[module] or "dlzero.commands.common" in GRAPH[module]
