"""Read the kernel's import statements, and check the two import rules against them.

The checks work on source text (``ast``), never by importing: they see every import statement,
including those inside functions and under ``if TYPE_CHECKING:``, and they run on a synthetic
snippet or a synthetic kernel as well as on the repository, which is how the tests show that each
rule can fail.

* :func:`plugin_violations` — plugins, integrations and the plugin template import the kernel only
  through the modules of :data:`PLUGIN_MODULES` / :data:`PLUGIN_PACKAGES`.
* :func:`storage_violations` — other packages use the storage toolkit (``zephon_storage``, a
  plugin-side library) through its root and its test kit only.
* :func:`private_name_violations` — nor do they import a ``_private`` name, or a name a public
  module does not list in its ``__all__``.
* :func:`layer_violations` — the kernel's modules import only their own or lower layers at the top
  level; upward imports are allowed only where a list names them.
"""

from __future__ import annotations

import ast
import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "zephon_core"

PLUGIN_MODULES = frozenset({"zephon_core", "zephon_core.plugin_api", "zephon_core.hookspecs"})
"""Kernel modules a plugin may import, themselves only (``zephon_core.plugin_api`` is, its imports are not).

``zephon_core.storage`` is not among them: it only forwards, lazily, to the storage toolkit's own
distribution for readers written against 0.1.0; the repository's plugins import ``zephon_storage``."""

PLUGIN_PACKAGES = ("zephon_core.conformance", "zephon_core.testing")
"""Kernel packages a plugin may import together with all their submodules (for its own tests)."""


ALLOWED_TEXT = "zephon_core, zephon_core.plugin_api, .hookspecs, .conformance(.*) and .testing(.*)"

STORAGE = "zephon_storage"
"""The storage toolkit readers build on (plugins/zephon-storage): a plugin-side library, held to the
plugin contract itself, whose own public surface is its root module and its test kit."""

STORAGE_PUBLIC = ("zephon_storage", "zephon_storage.testing")
"""What other packages may import of the storage toolkit: the root (names of its ``__all__``) and
the reader test kit with its submodules; its other modules are its own layout."""


def plugin_may_import(module: str) -> bool:
    """Whether the plugin contract lets a plugin import the kernel module ``module``."""
    return module in PLUGIN_MODULES or any(module == p or module.startswith(p + ".") for p in PLUGIN_PACKAGES)


@dataclass(frozen=True)
class Source:
    """One Python file to check: where it is (as reported) and its text."""

    path: str
    text: str


@dataclass(frozen=True)
class Import:
    """One kernel module an import statement runs.

    ``kind`` is ``"top"`` (runs when the importing module is imported), ``"deferred"`` (inside a
    function: runs when that function is called) or ``"typing"`` (under ``if TYPE_CHECKING:``: never
    runs).
    """

    module: str
    line: int
    kind: str


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of ``tree`` with its kind (``top``, ``deferred`` or ``typing``).

    A class body runs at import time, so its imports are ``top``; a function (or lambda) body does
    not, so everything under it is ``deferred``; ``typing`` wins over both.
    """
    out: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, kind))
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "typing")
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "top":
            kind = "deferred"
        for sub in ast.iter_child_nodes(node):
            visit(sub, kind)

    visit(tree, "top")
    return sorted(out, key=lambda item: item[0].lineno)


def _absolute(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    """The absolute module a (possibly relative) ``from ... import`` names, seen from ``module``."""
    if not node.level:
        return node.module or ""
    anchor = module.split(".") if is_pkg else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def kernel_modules(kernel: Path = KERNEL) -> dict[str, Path]:
    """Every module of the kernel package at ``kernel``, by dotted name."""
    out = {}
    for f in sorted(kernel.rglob("*.py")):
        parts = list(f.relative_to(kernel.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def facades(modules: Mapping[str, Path]) -> dict[str, dict[str, str]]:
    """The kernel's lazy re-export modules: each one's ``_EXPORTS`` literal, name -> defining module.

    ``from zephon_core import Pipeline`` runs ``zephon_core.pipeline`` (through ``__getattr__``), so
    the layer check follows a facade's names to the modules that define them.
    """
    out: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id == "_EXPORTS":
                out[name] = ast.literal_eval(value)
    return out


def imported_modules(
    tree: ast.Module,
    module: str,
    is_pkg: bool,
    modules: Iterable[str],
    exports: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Import]:
    """The kernel modules each import statement of ``tree`` runs (the deepest one it names).

    ``from a.b import c`` names the module ``a.b.c`` when that is a module, else ``a.b``; with
    ``exports`` (see :func:`facades`) a name of a facade is followed to its defining module.
    """
    known = set(modules)
    exports = exports or {}
    out: list[Import] = []
    for node, kind in import_statements(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = _absolute(node, module, is_pkg)
            targets = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    targets.append(sub)
                elif alias.name in exports.get(base, {}):
                    targets.append(exports[base][alias.name])
                else:
                    targets.append(base)
        for target in dict.fromkeys(targets):
            parts = target.split(".")
            deepest = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in known), None)
            if deepest is not None:
                out.append(Import(deepest, node.lineno, kind))
    return out


def _template_context(kind: str) -> dict[str, object]:
    """The plugin template's variables for ``kind``, rendered in order as cookiecutter does."""
    import jinja2

    raw = json.loads((ROOT / "cookiecutter" / "cookiecutter.json").read_text())
    ctx: dict[str, object] = {"kind": kind}
    for key, value in raw.items():
        if key != "kind":
            ctx[key] = jinja2.Template(value).render(cookiecutter=ctx) if isinstance(value, str) else value
    return ctx


def plugin_sources(root: Path = ROOT) -> list[Source]:
    """The Python sources of every plugin and integration, and the plugin template rendered for each
    kind (its files are Jinja templates, Python only once rendered)."""
    out = [
        Source(str(f.relative_to(root)), f.read_text())
        for f in sorted([*root.glob("plugins/*/src/**/*.py"), *root.glob("contrib/*/src/**/*.py")])
    ]
    template = sorted((root / "cookiecutter").rglob("*.py"))
    if template:
        import jinja2

        env = jinja2.Environment(keep_trailing_newline=True)
        raw = json.loads((root / "cookiecutter" / "cookiecutter.json").read_text())
        for kind in raw["kind"]:
            ctx = _template_context(kind)
            for f in template:
                text = env.from_string(f.read_text()).render(cookiecutter=ctx)
                out.append(Source(f"{f.relative_to(root)} (kind={kind})", text))
    return out


def _parse(source: Source) -> ast.Module:
    try:
        return ast.parse(source.text)
    except SyntaxError as exc:
        raise AssertionError(f"{source.path}:{exc.lineno}: cannot parse: {exc.msg}") from exc


def plugin_violations(sources: Iterable[Source], modules: Iterable[str]) -> list[str]:
    """One line per import (at any depth) of a kernel module the plugin contract does not allow."""
    known = set(modules)
    out = []
    for source in sources:
        for imp in imported_modules(_parse(source), "__plugin__", False, known):
            if not plugin_may_import(imp.module):
                out.append(
                    f"{source.path}:{imp.line}: imports {imp.module}, which is internal to the kernel "
                    f"(plugins import only {ALLOWED_TEXT})"
                )
    return out


def storage_public_names(root: Path = ROOT) -> frozenset[str]:
    """The storage toolkit's ``__all__``, read from its source (``sorted(_EXPORTS)`` or a literal list)."""
    init = root / "plugins" / "zephon-storage" / "src" / "zephon_storage" / "__init__.py"
    names = declared_public_names(STORAGE, {STORAGE: init})
    if names is None:
        raise AssertionError(f"{init}: no __all__ that can be read without importing it")
    return names


def storage_violations(sources: Iterable[Source], public: frozenset[str]) -> list[str]:
    """One line per import of a module of the storage toolkit outside :data:`STORAGE_PUBLIC`, or of a
    root name its ``__all__`` (``public``) does not list, from a file that is not the toolkit's own
    (``plugins/zephon-storage/``)."""
    out = []
    for source in sources:
        if source.path.startswith("plugins/zephon-storage/"):
            continue
        for node, _kind in import_statements(_parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            for module in names:
                if module != STORAGE and not module.startswith(STORAGE + "."):
                    continue
                if module == STORAGE and isinstance(node, ast.ImportFrom):
                    out += [
                        f"{source.path}:{node.lineno}: imports zephon_storage.{a.name}, which zephon_storage.__all__ "
                        "does not list (not public)"
                        for a in node.names
                        if a.name not in public and not (a.name.startswith("__") and a.name.endswith("__"))
                    ]
                    continue
                if module == STORAGE_PUBLIC[0] or module == STORAGE_PUBLIC[1] or module.startswith(STORAGE_PUBLIC[1] + "."):
                    continue
                out.append(
                    f"{source.path}:{node.lineno}: imports {module}, which is internal to zephon-storage "
                    f"(import zephon_storage itself, or zephon_storage.testing in tests)"
                )
    return out


def private_name_violations(sources: Iterable[Source], public_names: Callable[[str], frozenset[str] | None]) -> list[str]:
    """One line per kernel name imported that is ``_private``, or missing from its module's ``__all__``.

    ``public_names(module)`` gives a kernel module's ``__all__``, or ``None`` when it declares none
    (then only the underscore rule applies).
    """
    out = []
    for source in sources:
        for node, _kind in import_statements(_parse(source)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("zephon_core") and any(p.startswith("_") for p in alias.name.split(".")):
                        out.append(f"{source.path}:{node.lineno}: imports the private module {alias.name}")
                continue
            module = node.module or ""
            if node.level or not (module == "zephon_core" or module.startswith("zephon_core.")):
                continue
            if any(p.startswith("_") for p in module.split(".")):
                out.append(f"{source.path}:{node.lineno}: imports from the private module {module}")
                continue
            listed = public_names(module)
            for alias in node.names:
                if alias.name.startswith("__") and alias.name.endswith("__"):
                    continue  # module metadata (``__version__``), public by convention
                if alias.name.startswith("_"):
                    out.append(f"{source.path}:{node.lineno}: imports the private name {module}.{alias.name}")
                elif listed is not None and alias.name not in listed:
                    out.append(
                        f"{source.path}:{node.lineno}: imports {module}.{alias.name}, "
                        f"which {module}.__all__ does not list (not public)"
                    )
    return out


Layers = tuple[tuple[str, tuple[str, ...]], ...]
"""``(layer name, module patterns)`` from the lowest layer up; a pattern is a dotted name or an
``fnmatch`` glob (``zephon_core.runtime.*``); an exact name wins over a glob, a longer glob over a
shorter one."""


def layer_of(module: str, layers: Layers) -> int | None:
    """The index of ``module``'s layer, or ``None`` when no pattern places it."""
    best: tuple[int, int] | None = None  # (specificity, layer)
    for index, (_name, patterns) in enumerate(layers):
        for pattern in patterns:
            if pattern == module:
                return index
            if fnmatch.fnmatchcase(module, pattern) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), index)
    return None if best is None else best[1]


@dataclass(frozen=True)
class LayerReport:
    """What :func:`layer_report` found: rule breaks, and the exception entries nothing needs any more."""

    violations: list[str]
    stale: list[str]


def layer_report(
    kernel: Path,
    layers: Layers,
    known_exceptions: frozenset[tuple[str, str]],
    deferred_upward: frozenset[tuple[str, str]],
) -> LayerReport:
    """Check the layer order of the kernel package at ``kernel``.

    A top-level import from a module to a higher layer breaks the order unless ``(importer,
    imported)`` is in ``known_exceptions``. An upward import inside a function or under
    ``TYPE_CHECKING`` does not tie the layers at import time, but it is still a dependency: it must be
    in ``deferred_upward``. An entry of either set that the code no longer needs is reported as stale,
    so the lists only shrink. A module in no layer is a violation too (a new module gets a place).
    Importing a lazy re-export module itself is no edge: its own imports are all deferred.
    """
    modules = kernel_modules(kernel)
    exports = facades(modules)
    names = [n for n, _ in layers]
    violations: list[str] = []
    seen_top: set[tuple[str, str]] = set()
    seen_deferred: set[tuple[str, str]] = set()
    for module, path in modules.items():
        here = layer_of(module, layers)
        rel = path.relative_to(kernel.parent)
        if here is None:
            violations.append(f"{rel}: {module} is in no layer; add it to LAYERS")
            continue
        tree = ast.parse(path.read_text())
        for imp in imported_modules(tree, module, path.name == "__init__.py", modules, exports):
            if imp.module in exports:
                continue  # the re-export module itself (``from zephon_core import __version__``): runs nothing
            there = layer_of(imp.module, layers)
            if imp.module == module or there is None or there <= here:
                continue
            edge = (module, imp.module)
            what = f"{module} ({names[here]}) imports {imp.module} ({names[there]}), a higher layer"
            if imp.kind == "top":
                seen_top.add(edge)
                if edge not in known_exceptions:
                    violations.append(f"{rel}:{imp.line}: {what}")
            else:
                seen_deferred.add(edge)
                if edge not in deferred_upward:
                    violations.append(f"{rel}:{imp.line}: {what}, in a {imp.kind} import not in DEFERRED_UPWARD")
    stale = [f"KNOWN_EXCEPTIONS {a} -> {b}" for a, b in sorted(known_exceptions - seen_top)]
    stale += [f"DEFERRED_UPWARD {a} -> {b}" for a, b in sorted(deferred_upward - seen_deferred)]
    return LayerReport(violations, stale)


def declared_public_names(module: str, modules: Mapping[str, Path]) -> frozenset[str] | None:
    """A kernel module's ``__all__``, read from its source: a literal list or tuple, or
    ``sorted(_EXPORTS)`` (the keys of its literal ``_EXPORTS``); ``None`` when it declares neither."""
    path = modules.get(module)
    if path is None:
        return None
    exports = facades({module: path}).get(module, {})
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = node.value
            if isinstance(value, (ast.List, ast.Tuple)):
                return frozenset(ast.literal_eval(value))
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "sorted"
                and len(value.args) == 1
                and isinstance(value.args[0], ast.Name)
                and value.args[0].id == "_EXPORTS"
            ):
                return frozenset(exports)
    return None
