"""The package's modules import one another one way (STYLE.md, 9, as
tests/check_layers.sh holds the C layers to it): no import circle, counting
the imports inside functions, which only hide one."""

import ast
import os

from conftest import SOURCE_DIR

PACKAGE = os.path.join(SOURCE_DIR, "python", "sluice")


def import_graph():
    """module -> the package's modules it imports anywhere in its code."""
    modules = {n[:-3] for n in os.listdir(PACKAGE) if n.endswith(".py")}
    graph = {}
    for mod in modules:
        with open(os.path.join(PACKAGE, mod + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else
                            [a.name for a in node.names])
        graph[mod] = deps & modules
    return graph


def circle(graph):
    """One import circle as a list of modules, or None."""
    done, path = set(), []

    def visit(mod):
        if mod in path:
            return path[path.index(mod):] + [mod]
        if mod in done:
            return None
        path.append(mod)
        for dep in sorted(graph[mod]):
            found = visit(dep)
            if found:
                return found
        path.pop()
        done.add(mod)
        return None

    for mod in sorted(graph):
        found = visit(mod)
        if found:
            return found
    return None


def test_no_import_circle():
    graph = import_graph()
    assert "records" in graph["dataset"]  # (the parse sees `from . import`)
    found = circle(graph)
    assert found is None, "import circle: " + " -> ".join(found)


def test_circle_is_seen():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
