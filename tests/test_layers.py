"""The module graph has layers you can draw: no import cycle, and no import pointing upward.

The graph is read from the source (ast), not by importing: an edge A -> B for every `import B` /
`from B import ...` in A, at module level or inside a function, where B is one of the
repository's top-level modules. Strongly connected components (Tarjan's algorithm) find any
cycle; LAYERS says which modules are low and middle, everything else is high (train, evaluate,
the commands and benchmarks). A function-level import of a repository module is allowed only
where it saves start-up time, and its line says so. Nothing outside experiments/ imports an
experiment.
"""

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Low: the model and how it is loaded, plus plain utilities that import no other repo module.
LOW = {
    "backend", "cpu_native", "cpu_ops", "model", "kvcache", "lora", "quant", "load_weights",
    "gguf_cache", "chat_format", "prompts", "diversity", "stats", "broken_text", "flags", "errors",
    "strict_json", "atomic", "run_folder", "precision",
}  # fmt: skip
# Middle: sampling, the RL math and the loop's parts, rewards and judges.
MIDDLE = {
    "sampling", "kernels", "gwen", "grpo", "reward_model", "rubric", "rewards", "hacks",
    "reference", "routing", "policy_update", "checkpoint", "distributed", "runlog", "tblog",
    "config", "tasks", "chess_task", "gold", "rollout_batch", "run_state", "reward_refresh",
    "rm_data", "eval_hook", "frozen_states",
}  # fmt: skip
LAYERS = {**dict.fromkeys(LOW, 0), **dict.fromkeys(MIDDLE, 1)}  # any other module: 2 (high)
LAYER_NAMES = ("low", "middle", "high")


def modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(ROOT.glob("*.py"))}


def imports(path: Path, repo: set[str]) -> list[tuple[str, int, bool]]:
    """(imported repo module, line, inside a function) for every import statement in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    in_function = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            in_function |= {id(n) for n in ast.walk(fn) if n is not fn}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in repo and top != path.stem:
                out.append((top, node.lineno, id(node) in in_function))
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: {dep for dep, _, _ in imports(p, set(mods))} for m, p in mods.items()}


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


def test_every_layered_module_exists():
    assert set(LAYERS) <= set(modules()), sorted(set(LAYERS) - set(modules()))


def test_the_module_graph_has_no_cycle():
    g = graph()
    cycles = [c for c in strongly_connected(g) if len(c) > 1]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(a_cycle(g, c)) for c in cycles)


@pytest.mark.parametrize("layer", [0, 1], ids=LAYER_NAMES[:2])
def test_no_import_points_upward(layer):
    mods = modules()
    upward = [
        f"{m}.py:{line} imports {dep} ({LAYER_NAMES[LAYERS.get(dep, 2)]})"
        for m, path in mods.items()
        if LAYERS.get(m, 2) == layer
        for dep, line, _ in imports(path, set(mods))
        if LAYERS.get(dep, 2) > layer
    ]
    assert not upward, f"the {LAYER_NAMES[layer]} layer imports from above: {upward}"


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
    """Any module (the repository's, a library, the standard library), in the root modules and
    the data builders (data/*.py)."""
    hidden = []
    for path in [*modules().values(), *sorted((ROOT / "data").glob("*.py"))]:
        lines = path.read_text().splitlines()
        for dep, line in function_level_imports(path):
            said = "start-up" in lines[line - 1] or "start-up" in lines[line - 2]
            if not said:
                hidden.append(f"{path.relative_to(ROOT)}:{line} imports {dep}")
    assert not hidden, (
        "function-level imports without a `# start-up: ...` comment (import at module level, "
        f"or say what start-up time it saves): {hidden}"
    )


# Folders the experiments rule does not walk: the experiments, the tests, and run outputs (a
# user's scratch script in runs/ is not the project's).
OUTSIDE_THE_RULE = {"experiments", "tests", "runs", "reports"}


def test_nothing_outside_experiments_imports_an_experiment():
    """experiments/ sits above everything: no root module, data builder or other folder imports
    it (the experiments import each other and the library; tests import anything)."""
    paths = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in OUTSIDE_THE_RULE and not d.startswith(".")]
        paths += [Path(folder) / f for f in files if f.endswith(".py")]
    found = [
        f"{path.relative_to(ROOT)}:{line} imports experiments"
        for path in paths
        for dep, line, _ in imports(path, {"experiments"})
    ]
    assert paths and not found, found
