"""The package's import graph has no circles: every ``import`` of a qloom module by another,
at module level or inside a function (a late import hides a circle, it does not remove
it), read with the standard library's ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "qloom"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """qloom module -> the qloom modules it imports."""
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
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
                        out.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_checker_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_late_and_relative_imports():
    graph = import_graph()
    assert "qloom.nn.load" in graph["qloom.manifest"]          # inside a function
    assert "qloom.errors" in graph["qloom.flows.toolchain.synth"]
    assert "qloom.hw.mvu" in graph["qloom.flows.compile.engines.dense"]  # inside a function


# the layers below the flows (templates, simulation, the frontend, boards) never import them
LOWER = ("qloom.nn", "qloom.hw", "qloom.sim", "qloom.boards", "qloom.errors", "qloom.manifest")


def test_imports_go_one_way():
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith(LOWER)
                    for t in targets if t.startswith("qloom.flows"))
    assert not upward, "lower layers import the flows: " + "; ".join(upward)
