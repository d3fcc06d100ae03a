"""The kernel's structure rules, checked on the source text so they cannot silently erode.

* No import cycle among the modules of any package in the repository, counting lazy imports inside
  functions too (a cycle hidden in a function still ties two modules into one); only imports under
  ``if TYPE_CHECKING:`` are not edges.
* The builder, the runtime and the conformance suite never test for a concrete work source, fetch or
  batch class.
* No kernel module silences the type checker with ``type: ignore``, except the few counted in
  :data:`TYPE_IGNORE_EXCEPTIONS`; one more, anywhere, fails.
* Plugins, integrations and the plugin template import only public kernel *names*: nothing
  ``_private``, and from a module that declares ``__all__`` only what it lists. (Which kernel
  *modules* they may import is the allow-list of ``tests/test_layers.py``.)

Each rule is also run on a deliberate violation, to show it can fail.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.kernel_imports import Source, declared_public_names, kernel_modules, plugin_sources, private_name_violations

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
def test_no_import_cycles(pkg: Path) -> None:
    assert _cycles(_graph(pkg)) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reader.py").write_text("from pkg.index import build\n")
    (pkg / "index.py").write_text("def build():\n    from pkg.reader import Reader\n")  # the old jsonl shape
    assert _cycles(_graph(pkg)) == [["pkg.index", "pkg.reader"]]


def _kernel_core_files() -> list[Path]:
    core = ROOT / "zephon_core"
    parts = ("options", "definition", "binding", "starting", "answers", "steering", "checkpointing")
    builder = [core / f"{m}.py" for m in ("pipeline", *parts)]
    return [*builder, *sorted((core / "runtime").glob("*.py")), *sorted((core / "conformance").glob("*.py"))]


@pytest.mark.parametrize("path", _kernel_core_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_type_tests_on_concrete_stages(path: Path) -> None:
    text = path.read_text()
    concrete = r"isinstance\([^)]*\b(StaticMixtureWorkSource|FetchStage|BatchSpec|Fetch|Batch)\b"
    assert not re.search(concrete, text), f"{path.name} tests for a concrete source/fetch/batch class"


TYPE_IGNORE_EXCEPTIONS: dict[str, int] = {
    # Assigning ``__signature__`` on a function object, which typeshed does not declare.
    "zephon_core/builder_methods.py": 2,
    # Appending to ``out.task`` / ``out.payloads`` after a runtime check mypy cannot narrow on.
    "zephon_core/defaults/operators/stateful.py": 2,
}
"""The kernel's ``type: ignore`` comments today, per file: a count may only go down."""


def _type_ignores(files: dict[str, str], allowed: dict[str, int]) -> list[str]:
    """Every ``type: ignore`` of ``files`` (path -> text) beyond what ``allowed`` counts for its file,
    by file and line; and every allowance whose file now has fewer (lower the count)."""
    out = []
    for path, text in sorted(files.items()):
        lines = [n for n, line in enumerate(text.splitlines(), 1) if re.search(r"#\s*type:\s*ignore", line)]
        budget = allowed.get(path, 0)
        if len(lines) > budget:
            out += [f"{path}:{n}: type: ignore ({len(lines)} in the file, {budget} allowed)" for n in lines]
        elif len(lines) < budget:
            out.append(f"{path}: {len(lines)} type: ignore left, TYPE_IGNORE_EXCEPTIONS allows {budget}: lower it")
    return out


def test_no_new_type_ignore_in_the_kernel() -> None:
    files = {str(f.relative_to(ROOT)): f.read_text() for f in sorted((ROOT / "zephon_core").rglob("*.py"))}
    assert set(TYPE_IGNORE_EXCEPTIONS) <= set(files), "TYPE_IGNORE_EXCEPTIONS names a file that is gone"
    found = _type_ignores(files, TYPE_IGNORE_EXCEPTIONS)
    assert not found, "\n".join(found)


def test_the_type_ignore_rule_fails_on_a_new_one() -> None:
    clean = {"zephon_core/pipeline.py": "x = 1\n", "zephon_core/defaults/operators/stateful.py": "a  # type: ignore[x]\n" * 2}
    assert _type_ignores(clean, TYPE_IGNORE_EXCEPTIONS) == []
    new = {**clean, "zephon_core/pipeline.py": "x = 1\ny = f()  # type: ignore[no-any-return]\n"}
    assert _type_ignores(new, TYPE_IGNORE_EXCEPTIONS) == [
        "zephon_core/pipeline.py:2: type: ignore (1 in the file, 0 allowed)"
    ]
    one_more = {**clean, "zephon_core/defaults/operators/stateful.py": "a  #type:ignore\n" * 3}
    assert len(_type_ignores(one_more, TYPE_IGNORE_EXCEPTIONS)) == 3
    fewer = {**clean, "zephon_core/defaults/operators/stateful.py": "a\n"}
    assert _type_ignores(fewer, TYPE_IGNORE_EXCEPTIONS) == [
        "zephon_core/defaults/operators/stateful.py: 0 type: ignore left, TYPE_IGNORE_EXCEPTIONS allows 2: lower it"
    ]


def _public_names_violations(sources: list[Source]) -> list[str]:
    modules = kernel_modules()
    return private_name_violations(sources, lambda module: declared_public_names(module, modules))


def test_plugins_import_only_public_kernel_names() -> None:
    found = _public_names_violations(plugin_sources())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("from zephon_core import _kernel\n", "imports the private name zephon_core._kernel"),
        ("import zephon_core._kernel\n", "imports the private module zephon_core._kernel"),
        ("from zephon_core._kernel import x\n", "imports from the private module zephon_core._kernel"),
        ("def f():\n    from zephon_core.plugin_api import _EXPORTS\n", "imports the private name zephon_core.plugin_api._EXPORTS"),
        ("from zephon_core.plugin_api import Stage\n", "imports zephon_core.plugin_api.Stage, which zephon_core.plugin_api.__all__ does not list"),
        ("from zephon_core import runtime\n", "imports zephon_core.runtime, which zephon_core.__all__ does not list"),
    ],
)
def test_the_public_names_rule_fails_on_a_private_name(snippet: str, message: str) -> None:
    found = _public_names_violations([Source("zephon_fake/plugin.py", snippet)])
    assert len(found) == 1 and message in found[0] and found[0].startswith("zephon_fake/plugin.py:"), found
    allowed = "from zephon_core import __version__, Pipeline\nfrom zephon_core.plugin_api import MapTransform\n"
    assert _public_names_violations([Source("zephon_fake/plugin.py", allowed)]) == []


def test_no_plugin_or_contrib_test_edits_sys_path() -> None:
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
