"""The module graph has layers you can draw: no import cycle, and no import pointing upward.

The graph is read from the source (ast), not by importing: an edge A -> B for every import of B in
A, at module level or inside a function, where B is one of the repository's modules wherever it
lives (a file at the top, a package's module, a data builder, a recipe). Strongly connected
components (Tarjan's algorithm) find any cycle. LAYERS gives each folder, and each of the design
card's library modules at the top, its layer; a module imports from its own layer or below. The
leaves (the commands at the top, experiments/, bench/, data/'s builders, recipes/) are imported by
nothing outside them. Inside the middle layer, a task registers its rewards: rewards/ never
imports tasks/. A function-level import is allowed only where it saves start-up time, and its line
says so. knowledge/developing.md explains the layers; knowledge/layout.md why each module sits
where it does.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The design card's library modules, at the top beside the commands but low in the graph.
CARD_LIBRARY = ("model", "kvcache", "load_weights", "gwen", "rubric", "grpo")
# folder (or card module) -> layer, lowest first
LAYERS = {
    "core": 0,  # the backend, kernels, sampling, LoRA, quantization, prompts, plain utilities
    **dict.fromkeys(CARD_LIBRARY, 1),  # the model, its cache and loader, the RL API, judge, math
    "rewards": 2,  # the reward registry and scorer, reward model, hack detectors
    "tasks": 2,  # values and chess; a task registers its rewards
    "rl": 3,  # the loop's parts
    "evals": 4,  # evaluation's parts and the grader
}
LAYER_NAMES = ("core", "card library", "rewards and tasks", "rl", "evals", "leaf")
LEAF = len(LAYER_NAMES) - 1
# Folders of leaves: the commands at the top are leaves too (any top-level module not in LAYERS).
LEAF_FOLDERS = ("experiments", "bench", "data", "recipes")
SIDEWAYS_FORBIDDEN = {("rewards", "tasks")}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the repository outside tests/."""
    paths = list(ROOT.glob("*.py"))
    for folder in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        if (folder / "__init__.py").exists() or folder.name == "recipes":
            paths += folder.rglob("*.py")
    out = {}
    for p in sorted(paths):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def place(module: str) -> str:
    """The folder a module lives in, or its own name for a module at the top."""
    return module.split(".")[0]


def layer(module: str) -> int:
    return LAYERS.get(place(module), LEAF)


def resolve(name: str, repo: set[str]) -> str | None:
    """The repository module an imported dotted name refers to (its longest known prefix)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in repo:
            return ".".join(parts[:n])
    return None


def imports(module: str, path: Path, repo: set[str]) -> list[tuple[str, int, bool]]:
    """(imported repo module, line, inside a function) for every import statement in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    in_function = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            in_function |= {id(n) for n in ast.walk(fn) if n is not fn}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in repo else base for a in node.names]
        else:
            continue
        for name in names:
            dep = resolve(name, repo)
            if dep is not None and dep != module:
                out.append((dep, node.lineno, id(node) in in_function))
    return out


def edges() -> list[tuple[str, str, int]]:
    """(importer, imported, line) for every import among the repository's modules."""
    mods = modules()
    return sorted(
        {(m, dep, line) for m, p in mods.items() for dep, line, _ in imports(m, p, set(mods))}
    )


def graph() -> dict[str, set[str]]:
    g = {m: set() for m in modules()}
    for a, b, _ in edges():
        g[a].add(b)
    return g


def upward(edge_list) -> list[str]:
    """The edges that break the layer rule: to a higher layer (a leaf is above everything), or
    sideways where SIDEWAYS_FORBIDDEN says so."""
    out = []
    for a, b, line in edge_list:
        if layer(b) > layer(a) or (place(a), place(b)) in SIDEWAYS_FORBIDDEN:
            out.append(
                f"{a}:{line} ({LAYER_NAMES[layer(a)]}) imports {b} ({LAYER_NAMES[layer(b)]})"
            )
    return out


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                out.append(sorted(component))
    return out


def a_cycle(g: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through a strongly connected component, as a path a -> b -> ... -> a."""
    members, start = set(component), component[0]
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(g[path[-1]] & members):
            if w == start:
                return [*path, start]
            if w not in seen:
                seen.add(w)
                paths.append([*path, w])
    return component


def test_tarjan_finds_the_cycles_of_a_hand_made_graph():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    comps = sorted(strongly_connected(g))
    assert comps == [["a", "b", "c"], ["d"], ["e"]]
    assert a_cycle(g, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_the_rule_on_hand_made_edges():
    planted = [
        ("core.stats", "train", 3),  # core imports a command
        ("gwen", "rl.config", 4),  # a card module imports the loop's parts
        ("rl.config", "bench.train", 5),  # nothing outside the leaves imports a benchmark
        ("evals.grade", "experiments.premise_probe", 6),  # ... or an experiment
        ("rewards.hacks", "tasks.chess_task", 7),  # rewards never import tasks
        ("tasks.registry", "rewards.registry", 8),  # a task imports its rewards: fine
        ("bench.train", "train", 9),  # a benchmark runs the loop: fine
        ("evaluate", "evals.grade", 10),  # a command imports evals: fine
        ("rl.config", "core.flags", 11),  # down: fine
    ]
    assert [x.split(":")[0] for x in upward(planted)] == [a for a, _, n in planted if n <= 7]


def test_imports_resolve_to_modules_wherever_they_live():
    repo = set(modules())
    assert {"core.backend", "rl.config", "rewards.registry", "train", "data.make_data"} <= repo
    found = {dep for dep, _, _ in imports("train", ROOT / "train.py", repo)}
    assert {"core.backend", "rewards.registry", "tasks.registry", "rl.config"} <= found


def test_every_folder_has_a_layer():
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert folders <= {*LAYERS, *LEAF_FOLDERS}, sorted(folders - {*LAYERS, *LEAF_FOLDERS})
    assert all((ROOT / f"{m}.py").exists() for m in CARD_LIBRARY)


def test_the_module_graph_has_no_cycle():
    g = graph()
    cycles = [c for c in strongly_connected(g) if len(c) > 1]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(a_cycle(g, c)) for c in cycles)


def test_no_import_points_upward():
    bad = upward(edges())
    assert not bad, f"imports against the layers (tests/test_layers.py LAYERS): {bad}"


def function_level_imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement inside a function of `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(a.name, node.lineno) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((node.module or ".", node.lineno))
    return sorted(set(out), key=lambda x: x[1])


def test_function_level_imports_say_they_save_start_up_time():
    """Any module (the repository's, a library, the standard library), in every module of the
    repository outside tests/."""
    hidden = []
    for path in modules().values():
        lines = path.read_text().splitlines()
        for dep, line in function_level_imports(path):
            said = "start-up" in lines[line - 1] or "start-up" in lines[line - 2]
            if not said:
                hidden.append(f"{path.relative_to(ROOT)}:{line} imports {dep}")
    assert not hidden, (
        "function-level imports without a `# start-up: ...` comment (import at module level, "
        f"or say what start-up time it saves): {hidden}"
    )
