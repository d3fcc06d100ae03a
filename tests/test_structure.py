"""The kernel's structure rules, checked on the source text so they cannot silently erode.

* No import cycle among the modules of any package in the repository, counting lazy imports inside
  functions too (a cycle hidden in a function still ties two modules into one); only imports under
  ``if TYPE_CHECKING:`` are not edges.
* The builder, the runtime and the conformance suite never test for a concrete work source, fetch or
  batch class, and carry no ``type: ignore``.
* Plugins import only public kernel modules (no ``zephon_core._private`` module).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _packages() -> list[Path]:
    """Every importable top-level package of the repository: the kernel and each distribution's."""
    found = [ROOT / "zephon_core"]
    for dist in sorted([*ROOT.glob("plugins/*/src/*"), *ROOT.glob("contrib/*/src/*")]):
        if (dist / "__init__.py").is_file():
            found.append(dist)
    return found


def _module_name(pkg: Path, file: Path) -> str:
    rel = file.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, module: str, is_pkg: bool) -> list[str]:
    """Every module an import statement names, at any depth (lazy imports in functions too), except
    under ``if TYPE_CHECKING:``, which never runs."""
    out: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node):
                for n in node.orelse:
                    self.visit(n)
            else:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            out.extend(a.name for a in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out.append(base)
            out.extend(f"{base}.{a.name}" for a in node.names)

    Visitor().visit(tree)
    return out


def _graph(pkg: Path) -> dict[str, set[str]]:
    files = {_module_name(pkg, f): f for f in pkg.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        for target in _imports(ast.parse(f.read_text()), mod, f.name == "__init__.py"):
            # Importing a.b.c runs a, a.b and a.b.c: each existing module is an edge.
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name in files and name != mod and not mod.startswith(name + "."):
                    graph[mod].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


@pytest.mark.parametrize("pkg", _packages(), ids=lambda p: p.name)
def test_no_import_cycles(pkg: Path):
    assert _cycles(_graph(pkg)) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path):
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reader.py").write_text("from pkg.index import build\n")
    (pkg / "index.py").write_text("def build():\n    from pkg.reader import Reader\n")  # the old jsonl shape
    assert _cycles(_graph(pkg)) == [["pkg.index", "pkg.reader"]]


def _kernel_core_files() -> list[Path]:
    core = ROOT / "zephon_core"
    return [core / "pipeline.py", *sorted((core / "runtime").glob("*.py")), *sorted((core / "conformance").glob("*.py"))]


@pytest.mark.parametrize("path", _kernel_core_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_type_tests_on_concrete_stages_and_no_type_ignore(path: Path):
    text = path.read_text()
    concrete = r"isinstance\([^)]*\b(StaticMixtureWorkSource|FetchStage|BatchSpec|Fetch|Batch)\b"
    assert not re.search(concrete, text), f"{path.name} tests for a concrete source/fetch/batch class"
    assert "type: ignore" not in text, f"{path.name} silences the type checker"


def test_plugins_import_only_public_kernel_modules():
    bad = []
    for pkg in _packages()[1:]:
        for f in pkg.rglob("*.py"):
            for target in _imports(ast.parse(f.read_text()), _module_name(pkg, f), f.name == "__init__.py"):
                if target.startswith("zephon_core") and any(p.startswith("_") for p in target.split(".")[1:]):
                    bad.append(f"{f.relative_to(ROOT)}: {target}")
    assert bad == []


def test_no_plugin_or_contrib_test_edits_sys_path():
    """Plugin tests import shared helpers from ``zephon_core.testing`` or their own package, never by path."""
    offenders = []
    for folder in ("plugins", "contrib"):
        for f in (ROOT / folder).rglob("*.py"):
            text = f.read_text()
            if re.search(r"sys\.path\.(insert|append)|sys\.path\s*=|syspath_prepend", text) and "tests" in f.parts:
                offenders.append(str(f.relative_to(ROOT)))
    # The one exception puts a throwaway module on the *driver's* path on purpose: what it tests is
    # that Ray workers, which do not share that path, fail with a clear error.
    assert offenders in ([], ["contrib/zephon-ray/tests/test_executor.py"]), offenders
