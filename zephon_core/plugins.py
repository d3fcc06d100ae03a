"""Plugin discovery (the ``zephon`` entry-point group, loaded by pluggy) and the registry of what plugins provide.

There is no process-wide manager: code that needs plugins takes ``plugins=`` (a :class:`ZephonPluginManager`),
else builds a fresh one with :func:`default_plugin_manager`. Only the entry-point scan is cached."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from zephon_core import hookspecs
from zephon_core.errors import ConfigError, PluginError, ReaderError
from zephon_core.hookspecs import KINDS as KINDS  # re-exported: the kinds are defined with the hooks
from zephon_core.hookspecs import Kind as Kind

if TYPE_CHECKING:
    from zephon_core.hookspecs import Subparsers
    from zephon_core.work.readers import Reader

KNOWN_PROVIDERS: dict[tuple[str, str], str] = {
    (kind, name): package.format(name)
    for kind, package, names in (
        ("operator", "zephon-tokenize", "tokenize tokenize_chat ensure_mixture"),
        ("operator", "zephon-pack", "pack_sequences"),
        ("operator", "zephon-vision", "decode_image resize center_crop random_resized_crop"),
        ("operator", "zephon-vision", "horizontal_flip normalize patchify"),
        ("runner", "zephon-ray", "ray"),
        ("reader", "zephon-{}", "jsonl parquet vortex litdata mds hf lance webdataset"),
        ("demo", "zephon-demo", "text kernel"),
        ("demo", "zephon-vlm-demo", "vlm"),
        ("observer", "zephon-observe", "manifest validate autotune"),
        ("command", "zephon-observe", "profile manifest"),
        ("command", "zephon-recipes", "check run diff recipe-schema"),
        ("command", "zephon-storage", "show inspect index"),
        ("command", "zephon-stubs", "stubs"),
    )
    for name in names.split()
}
"""First-party names, so a missing plugin's (or ``zephon`` subcommand's) error can say what to install."""

CONTRIB = frozenset(
    "zephon-demo zephon-observe zephon-ray zephon-recipes zephon-stubs zephon-torch zephon-vlm-demo".split()
)
"""First-party distributions kept under ``contrib/`` of the repository (the others are under ``plugins/``)."""


def install_hint(package: str) -> str:
    """How to install a first-party distribution: from the package index, or from a checkout."""
    folder = "contrib" if package in CONTRIB else "plugins"
    return (
        f"it is provided by the distribution {package}: install it with `pip install {package}` "
        f"(once published), or from a checkout of the zephon repository with `pip install -e {folder}/{package}`"
    )


def check_contract(plugin: object, package: str, version: str) -> None:
    """Refuse a plugin whose ``ZEPHON_CONTRACT`` is malformed or not implemented by this kernel
    (:data:`~zephon_core.hookspecs.PLUGIN_CONTRACT`)."""
    declared = plugin.ZEPHON_CONTRACT if isinstance(plugin, hookspecs.DeclaresContract) else None
    if declared is None:
        return
    from zephon_core import __version__

    kernel = hookspecs.PLUGIN_CONTRACT
    who = f"{package} {version}" if version != "unknown" else package
    shaped = isinstance(declared, tuple) and len(declared) == 2
    if not shaped or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in declared):
        raise PluginError(f"plugin {who}: ZEPHON_CONTRACT must be a (major, minor) tuple of ints, not {declared!r}")
    if declared[0] != kernel[0] or declared[1] > kernel[1]:
        major, minor = declared
        raise PluginError(
            f"plugin {who} was built for plugin contract {major}.{minor}, but zephon-core {__version__} implements "
            f"contract {kernel[0]}.{kernel[1]} (it loads plugins built for {kernel[0]}.0 to {kernel[0]}.{kernel[1]}); "
            f"install a release of {package} built for contract {kernel[0]}.x, or a zephon-core that implements "
            f"{major}.{minor}, or uninstall {package}"
        )


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
    """One provided reader, operator, runner, demo, field validator or observer."""

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
        if not isinstance(reg.name, str) or not reg.name.isidentifier():
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
            raise PluginError(f"{msg}; {install_hint(hint)}" if hint else msg)
        return reg

    def detect_format(self, path: str, storage_options: dict[str, Any] | None = None) -> str:
        """The one installed format whose detector accepts ``path`` (``storage_options`` go to fsspec)."""
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
        except Exception as exc:
            raise ReaderError(f"cannot open {path!r}: {exc}") from exc
        files: list[str] | None = None
        try:
            if fs.isdir(root):
                files = sorted(
                    fs.relpath(f, root) if hasattr(fs, "relpath") else f[len(root) :].lstrip("/") for f in fs.find(root)
                )
            elif fs.exists(root):
                files = [root.rsplit("/", 1)[-1]]
        except Exception as exc:
            raise ReaderError(f"cannot list {path!r}: {exc}") from exc
        if files is None:
            raise ReaderError(f"dataset path {path!r} does not exist")
        detectors = {n: self.items[("reader", n)].extra.get("detect") for n in self.names("reader")}
        matches = [n for n, detect in detectors.items() if detect is not None and load_object(detect)(fs, root, files)]
        if not matches:
            installed = ", ".join(n for n, detect in detectors.items() if detect) or "none"
            raise ReaderError(
                f"no installed format recognises {path!r} (installed formats: {installed}; "
                "install a zephon-<format> package or pass format=)"
            )
        if len(matches) > 1:
            raise ReaderError(f"{path!r} looks like several formats {matches}; pass format= to choose one")
        return matches[0]

    def make_reader(self, fmt: str, path: str, **options: Any) -> Reader:
        factory: Callable[..., Reader] = self.get("reader", fmt).load()
        try:
            return factory(path, **options)
        except TypeError as exc:
            raise ConfigError(f"reader {fmt!r}: bad options {sorted(options)}: {exc}") from exc


@dataclass(frozen=True)
class EntryPointPlugin:
    """A plugin object loaded from a ``zephon`` entry point, and the distribution providing it."""

    name: str
    """The entry point's name (also the plugin's name in the pluggy manager)."""
    plugin: object
    package: str
    version: str


_scan_lock = threading.RLock()  # re-entrant: a plugin module may build a manager while being imported
_scan: tuple[EntryPointPlugin, ...] | None = None


def entrypoint_plugins(*, rescan: bool = False) -> tuple[EntryPointPlugin, ...]:
    """Every installed ``zephon`` entry point, loaded once per process: the scan costs ~10 ms that every
    ``Pipeline`` built without ``plugins=`` would pay, and plugin modules cannot leak state between managers.
    ``rescan=True`` walks again (after an install); a failed scan is not cached."""
    global _scan
    with _scan_lock:
        if _scan is None or rescan:
            _scan = None
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)  # a hookimpl with wrong arguments then fails here, attributed to its package
            try:
                pm.load_setuptools_entrypoints(hookspecs.PROJECT)
            except Exception as exc:
                raise _load_error(pm, exc) from exc
            _scan = tuple(
                EntryPointPlugin(pm.get_name(plugin) or "", plugin, dist.project_name, dist.version)
                for plugin, dist in pm.list_plugin_distinfo()
            )
        return _scan


def _load_error(pm: pluggy.PluginManager, exc: Exception) -> PluginError:
    """Name the entry point and package that made pluggy's scan raise: pluggy registers each entry point (in
    ``distributions()`` order) before loading the next, so the culprit is the first one not registered."""
    from importlib.metadata import distributions

    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == hookspecs.PROJECT and not pm.has_plugin(ep.name) and not pm.is_blocked(ep.name):
                package = dist.metadata["name"]
                return PluginError(
                    f"plugin {ep.name!r} of package {package} {dist.version} failed to load "
                    f"({ep.value}): {type(exc).__name__}: {exc}; reinstall or uninstall {package}"
                )
    return PluginError(f"a {hookspecs.PROJECT!r} entry point failed to load: {type(exc).__name__}: {exc}")


class ZephonPluginManager:
    """A pluggy manager plus the registry it fills once, here: build one per application, CLI call or
    test, and everything built with it sees the same plugins.

    Args:
        load_entrypoints: register the installed entry points; False gives the kernel's own and default
            plugins only (hermetic tests).
        plugins: more plugin objects (modules, or instances with ``@hookimpl`` methods), registered last.
        block: plugin names not to register (an entry point's, or a non-essential default plugin's).

    Raises:
        PluginError: a plugin failed to load, defines a ``zephon_*`` function that is not a hook,
            or registers something invalid or twice."""

    def __init__(
        self, *, load_entrypoints: bool = True, plugins: Iterable[object] | None = None, block: Iterable[str] = ()
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._packages: dict[int, tuple[str, str]] = {}
        from zephon_core import __version__, _kernel, defaults

        for name in defaults.check_block(block):
            self.pm.set_blocked(name)  # a blocked name's plugin (default or entry point) is then not registered
        own = [EntryPointPlugin(p.__name__, p, "zephon-core", __version__) for p in (_kernel, *defaults.plugins())]
        for ep in (*own, *(entrypoint_plugins() if load_entrypoints else ())):
            self._packages[id(ep.plugin)] = (ep.package, ep.version)
            self.register_plugin(ep.plugin, name=ep.name)
        for p in plugins or []:
            self.register_plugin(p)
        self._check_names()
        self.registry = Registry()
        for kind in KINDS:  # in this order; each kind's hook is zephon_register_<kind>s
            for impl in getattr(self.pm.hook, f"zephon_register_{kind}s").get_hookimpls():
                impl.function(register=self._registrar(kind, *self._package_of(impl.plugin)))

    def register_plugin(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object (in ``__init__``), refusing one built for another plugin contract."""
        check_contract(plugin, *self._package_of(plugin))
        try:
            self.pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"plugin {self._package_of(plugin)[0]!r} cannot be registered: {exc}") from exc

    def _package_of(self, plugin: object) -> tuple[str, str]:
        """(package, version) to credit; a plugin object given in code is named by its module (or class)."""
        if id(plugin) in self._packages:
            return self._packages[id(plugin)]
        name = getattr(plugin, "__name__", None) or f"{type(plugin).__module__}.{type(plugin).__qualname__}"
        return (str(name), "unknown")

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

    def _registrar(self, kind: Kind, package: str, version: str) -> Callable[..., None]:
        """The ``register`` callback for one plugin's hook, checked at run time (a plugin need not be
        type-checked) so a mistake is an error naming the package, not a ``TypeError`` inside pluggy."""
        allowed = {"reader": {"detect", "index"}, "observer": {"check"}}.get(kind, set())
        call = f"{package}: register() for a {kind}"

        def register(*args: Any, **kwargs: Any) -> None:
            if args:
                raise PluginError(f"{call} takes keyword arguments only (name=, factory=, ...)")
            missing = [k for k in ("name", "factory") if k not in kwargs]
            if missing:
                raise PluginError(f"{call} is missing {missing}")
            name, factory = kwargs.pop("name"), kwargs.pop("factory")
            description = kwargs.pop("description", "")
            unknown = set(kwargs) - allowed
            if unknown:
                raise PluginError(f"{call} got unknown arguments {sorted(unknown)}")
            if not isinstance(factory, str) and not callable(factory):
                raise PluginError(f"{package}: {kind} {name!r} factory must be callable or 'module:attr'")
            if not isinstance(description, str):
                raise PluginError(f"{package}: {kind} {name!r} description must be a string")
            self.registry.add(Registration(kind, name, factory, package, version, description, kwargs))

        return register

    def add_commands(self, subparsers: Subparsers) -> dict[str, tuple[str, str]]:
        """Let every plugin add its ``zephon`` subcommands, kernel first (so ``zephon --help`` lists its
        commands first); return each command's ``(package, version)``.

        Raises:
            PluginError: two packages add a command of the same name (naming both), or a hook failed."""
        import argparse  # here, not at the top: building a pipeline never needs it

        def twice(package: str, name: str, other: str) -> PluginError:
            return PluginError(f"{package}: zephon command {name} is added twice: by {other} and by {package}")

        owners: dict[str, tuple[str, str]] = {}
        for impl in self.pm.hook.zephon_register_commands.get_hookimpls():
            package, version = self._package_of(impl.plugin)
            before = dict(subparsers.choices)
            try:
                impl.function(subparsers=subparsers)
            except argparse.ArgumentError as exc:  # argparse refuses a name already taken (3.11+)
                name = exc.message.rsplit(" ", 1)[-1]
                raise twice(package, name, owners.get(name, ("another plugin", ""))[0]) from exc
            replaced = [n for n, p in before.items() if subparsers.choices.get(n) is not p]
            if replaced:  # older argparse replaces silently
                raise twice(package, repr(replaced[0]), owners[replaced[0]][0])
            for name in [n for n in subparsers.choices if n not in before]:  # in the order added
                owners[name] = (package, version)
        return owners

    def listing(self) -> list[dict[str, str]]:
        """Every registration as rows: name, kind, package, version, description."""
        return [
            {"name": r.name, "kind": r.kind, "package": r.package, "version": r.version, "description": r.description}
            for _, r in sorted(self.registry.items.items())
        ]


def default_plugin_manager() -> ZephonPluginManager:
    """A fresh manager with every installed plugin: what ``plugins=None`` means everywhere. Fresh on every
    call (about a millisecond), so nothing registered on one leaks into another pipeline, thread or test."""
    return ZephonPluginManager()


def get_plugin_manager(*, refresh: bool = False) -> ZephonPluginManager:
    """Deprecated alias of :func:`default_plugin_manager`; ``refresh`` rescans the entry points first."""
    if refresh:
        entrypoint_plugins(rescan=True)
    return default_plugin_manager()
