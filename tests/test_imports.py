"""The shape of the library: its import graph has no cycle (a module imports only modules beneath it;
imports inside functions count too, which is how the last cycle, adapters -> token_jacobians ->
jacobian -> adapters, hid), and no module or function outgrows what a reader can hold."""

import ast
import importlib.util
import re
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "workflow" / "crosslayer"


def module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root=LIBRARY):
    """``{module: {crosslayer modules it imports, at any depth of its code}}``."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                # `from pkg import mod` imports pkg.mod when that is a module, else pkg
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph):
    """One cycle as a list of modules (first == last), or None."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_library_imports_without_a_cycle():
    graph = import_graph()
    assert len(graph) > 30 and "crosslayer.models.adapters" in graph["crosslayer.jacobians.multi_token"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    package = tmp_path / "crosslayer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from crosslayer.b import f\n")
    (package / "b.py").write_text("def f():\n    from crosslayer import c\n")
    (package / "c.py").write_text("from .a import g\n")
    assert find_cycle(import_graph(package)) == ["crosslayer.a", "crosslayer.b", "crosslayer.c", "crosslayer.a"]


# -- sizes: a module a reader can hold, a function that fits a screen ---------------------------------

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80  # code, not counting the docstring


def function_lengths(path):
    """``(name, code lines)`` of every function in `path`, its docstring left out."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) and len(node.body) > 1 else node.body
            yield node.name, node.end_lineno - body[0].lineno + 1


def test_modules_and_functions_stay_small():
    sources = [*LIBRARY.rglob("*.py"), *(LIBRARY.parents[1] / "bench").rglob("*.py")]
    assert len(sources) > 60
    long_modules = {p.name: n for p in sources if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    long_functions = {f"{p.name}:{name}": n for p in sources
                      for name, n in function_lengths(p) if n > MAX_FUNCTION_LINES}
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines of code: {long_functions}"


def test_function_lengths_leave_out_the_docstring(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('def f():\n    """Doc\n\n    more.\n    """\n    a = 1\n    return a\n\n\ndef g():\n    return 2\n')
    assert dict(function_lengths(path)) == {"f": 2, "g": 1}


# Imported inside functions, and only these: each is slow to import or needed by few callers, and a
# job that does not use it should not pay for it (transformers alone takes seconds; registration,
# tables and figures never load a model).
LAZY = {"transformers", "safetensors", "tokenizers", "datasets", "gensim", "torchvision", "torch", "scipy",
        "pandas", "statsmodels", "matplotlib", "lm_eval"}
# Library modules that import torch: the claims readers' models table reads an architecture through
# its adapter, and the workflow lists the readers' files while building every DAG.
LAZY_LOCAL = {"crosslayer.models.adapters"}


def test_imports_sit_at_module_top_unless_heavy():
    local = set()
    for path in LIBRARY.rglob("*.py"):
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, ast.Import):
                        local |= {(path.name, alias.name.split(".")[0]) for alias in node.names}
                    elif isinstance(node, ast.ImportFrom) and (node.level or node.module not in LAZY_LOCAL):
                        local.add((path.name, "." if node.level else node.module.split(".")[0]))
    misplaced = sorted((name, module) for name, module in local if module not in LAZY)
    assert not misplaced, f"imports inside functions that belong at the top of their module: {misplaced}"


def test_the_rules_import_what_the_library_has():
    # .smk files are not Python to the test tools above: their imports are checked here, by name
    rules = [*(LIBRARY.parents[1] / "workflow" / "rules").glob("*.smk"), LIBRARY.parents[1] / "Snakefile"]
    imports = [(path.name, m[1], [n.split(" as ")[0].strip() for n in m[2].split(",")]) for path in rules
               for m in re.finditer(r"^\s*from (crosslayer[\w.]*) import ([\w, ]+)", path.read_text(), re.M)]
    assert len(imports) >= 3

    def has(module, attr):  # a name in the module, or a submodule of the package
        found = importlib.import_module(module)
        return hasattr(found, attr) or (hasattr(found, "__path__") and importlib.util.find_spec(f"{module}.{attr}"))

    missing = [f"{name}: {module}.{attr}" for name, module, attrs in imports for attr in attrs if not has(module, attr)]
    assert not missing, f"the rules import names the library lacks: {missing}"
