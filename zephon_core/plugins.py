"""Plugin discovery and the registry of readers, operators and runners.

Plugins are found through the ``zephon`` entry-point group (each entry point names a module or
object holding ``@hookimpl`` functions). The kernel's built-ins are registered through the same
hooks. A misspelled ``zephon_*`` hook fails loudly instead of being ignored.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pluggy

from zephon_core import hookspecs
from zephon_core.errors import ConfigError, PluginError, ReaderError

Kind = Literal["reader", "operator", "runner"]

KNOWN_PROVIDERS: dict[tuple[str, str], str] = {
    ("operator", "tokenize"): "zephon-tokenize",
    ("operator", "pack_sequences"): "zephon-pack",
    ("operator", "ensure_mixture"): "zephon-tokenize",
    ("runner", "ray"): "zephon-ray",
    ("reader", "jsonl"): "zephon-jsonl",
    ("reader", "parquet"): "zephon-parquet",
    ("reader", "vortex"): "zephon-vortex",
    ("reader", "litdata"): "zephon-litdata",
    ("reader", "mds"): "zephon-mds",
}
"""First-party names, so a missing plugin's error can say which package to install."""


def load_object(ref: Any) -> Any:
    """Resolve a lazy ``"module:attr"`` reference (or return a non-string as is)."""
    if not isinstance(ref, str):
        return ref
    mod_name, _, attr = ref.partition(":")
    if not attr:
        raise PluginError(f"lazy reference {ref!r} must look like 'module:attribute'")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot load {ref!r}: {exc}") from exc
    return obj


@dataclass
class Registration:
    """One provided reader, operator or runner."""

    kind: Kind
    name: str
    factory: Any
    package: str
    version: str
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        obj = load_object(self.factory)
        if not callable(obj):
            raise PluginError(
                f"{self.kind} {self.name!r} from {self.package}: factory {self.factory!r} is not callable"
            )
        return obj


class Registry:
    """What the installed plugins provide, by kind and name."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Registration] = {}

    def add(self, reg: Registration) -> None:
        key = (reg.kind, reg.name)
        if not reg.name.isidentifier():
            raise PluginError(f"{reg.package}: {reg.kind} name {reg.name!r} must be a Python identifier")
        if key in self.items:
            other = self.items[key]
            raise PluginError(f"{reg.kind} {reg.name!r} is registered twice: by {other.package} and by {reg.package}")
        self.items[key] = reg

    def names(self, kind: Kind) -> list[str]:
        return sorted(n for k, n in self.items if k == kind)

    def get(self, kind: Kind, name: str) -> Registration:
        reg = self.items.get((kind, name))
        if reg is None:
            hint = KNOWN_PROVIDERS.get((kind, name))
            installed = ", ".join(self.names(kind)) or "none"
            msg = f"no {kind} named {name!r} is installed (installed: {installed})"
            if hint:
                msg += f"; install it with: pip install {hint}"
            raise PluginError(msg)
        return reg

    # -- readers -----------------------------------------------------------------------------
    def detect_format(self, path: str, storage_options: dict[str, Any] | None = None) -> str:
        """The one installed format whose detector accepts ``path``; else a clear error.

        ``storage_options`` go to fsspec (e.g. an S3 endpoint), as the reader would use them.
        """
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        except Exception as exc:
            raise ReaderError(f"cannot open {path!r}: {exc}") from exc
        try:
            if fs.isdir(root):
                files = sorted(
                    fs.relpath(f, root) if hasattr(fs, "relpath") else f[len(root) :].lstrip("/") for f in fs.find(root)
                )
            elif fs.exists(root):
                files = [root.rsplit("/", 1)[-1]]
            else:
                raise ReaderError(f"dataset path {path!r} does not exist")
        except ReaderError:
            raise
        except Exception as exc:
            raise ReaderError(f"cannot list {path!r}: {exc}") from exc
        matches = []
        for name in self.names("reader"):
            detect = self.items[("reader", name)].extra.get("detect")
            if detect is None:
                continue
            if load_object(detect)(fs, root, files):
                matches.append(name)
        installed = [n for n in self.names("reader") if self.items[("reader", n)].extra.get("detect")]
        if not matches:
            raise ReaderError(
                f"no installed format recognises {path!r} (installed formats: {', '.join(installed) or 'none'}; "
                "install a zephon-<format> package or pass format=)"
            )
        if len(matches) > 1:
            raise ReaderError(f"{path!r} looks like several formats {matches}; pass format= to choose one")
        return matches[0]

    def make_reader(self, fmt: str, path: str, **options: Any) -> Any:
        factory = self.get("reader", fmt).load()
        try:
            return factory(path, **options)
        except TypeError as exc:
            raise ConfigError(f"reader {fmt!r}: bad options {sorted(options)}: {exc}") from exc


class ZephonPluginManager:
    """A pluggy manager plus the registry it fills. Make a fresh one per test if you like."""

    def __init__(self, *, load_entrypoints: bool = True, plugins: list[object] | None = None) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._packages: dict[int, tuple[str, str]] = {}
        from zephon_core import __version__, _builtins

        self.register_plugin(_builtins)
        self._packages[id(_builtins)] = ("zephon-core", __version__)
        if load_entrypoints:
            self._load_entrypoints()
        for p in plugins or []:
            self.register_plugin(p)
        self._check_names()
        self.registry = Registry()
        self._collect()

    def register_plugin(self, plugin: object, name: str | None = None) -> None:
        self.pm.register(plugin, name=name)

    def _load_entrypoints(self) -> None:
        """Load every ``zephon`` entry point; a broken one is an error naming its package."""
        from importlib.metadata import distributions

        seen: set[str] = set()
        for dist in distributions():
            for ep in dist.entry_points:
                if ep.group != hookspecs.PROJECT or ep.name in seen:
                    continue
                seen.add(ep.name)
                package = dist.metadata["name"]
                try:
                    plugin = ep.load()
                except Exception as exc:
                    raise PluginError(
                        f"plugin {ep.name!r} of package {package} {dist.version} failed to load "
                        f"({ep.value}): {type(exc).__name__}: {exc}; reinstall or uninstall {package}"
                    ) from exc
                self.register_plugin(plugin, name=ep.name)
                self._packages[id(plugin)] = (package, dist.version)

    def _package_of(self, plugin: object) -> tuple[str, str]:
        return self._packages.get(id(plugin), (getattr(plugin, "__name__", repr(plugin)), "unknown"))

    def _check_names(self) -> None:
        known = {n for n in dir(hookspecs) if n.startswith("zephon_")}
        for plugin in self.pm.get_plugins():
            for attr in dir(plugin):
                if attr.startswith("zephon_") and attr not in known and callable(getattr(plugin, attr, None)):
                    raise PluginError(
                        f"plugin {self._package_of(plugin)[0]!r} defines {attr!r}, which is not a zephon hook "
                        f"(known hooks: {', '.join(sorted(known))})"
                    )
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from exc

    def _collect(self) -> None:
        for kind, hook in (
            ("reader", self.pm.hook.zephon_register_readers),
            ("operator", self.pm.hook.zephon_register_operators),
            ("runner", self.pm.hook.zephon_register_runners),
        ):
            for impl in hook.get_hookimpls():
                package, version = self._package_of(impl.plugin)
                impl.function(register=self._registrar(kind, package, version))

    def _registrar(self, kind: Kind, package: str, version: str) -> Callable[..., None]:
        def register(*, name: str, factory: Any, description: str = "", **extra: Any) -> None:
            allowed = {"reader": {"detect", "index"}, "operator": set(), "runner": set()}[kind]
            unknown = set(extra) - allowed
            if unknown:
                raise PluginError(f"{package}: register() for a {kind} got unknown arguments {sorted(unknown)}")
            if not isinstance(factory, str) and not callable(factory):
                raise PluginError(f"{package}: {kind} {name!r} factory must be callable or 'module:attr'")
            self.registry.add(Registration(kind, name, factory, package, version, description, extra))

        return register

    def listing(self) -> list[dict[str, str]]:
        """Every registration as rows: name, kind, package, version, description."""
        return [
            {"name": r.name, "kind": r.kind, "package": r.package, "version": r.version, "description": r.description}
            for (_, _), r in sorted(self.registry.items.items())
        ]


_default: ZephonPluginManager | None = None


def get_plugin_manager(*, refresh: bool = False) -> ZephonPluginManager:
    """The process-wide plugin manager (entry points loaded once); ``refresh`` rebuilds it."""
    global _default
    if _default is None or refresh:
        _default = ZephonPluginManager()
    return _default
