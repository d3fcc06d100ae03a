"""Plugin discovery and the registry of readers, operators, runners, demos, validators and observers.

Plugins are found through the ``zephon`` entry-point group (each entry point names a module or
object holding ``@hookimpl`` functions), loaded by pluggy's own
``PluginManager.load_setuptools_entrypoints``. The kernel's default plugins
(:mod:`zephon_core.defaults`) and its own runners and commands are registered through the same
hooks. A misspelled ``zephon_*`` hook fails loudly instead of being ignored.

There is no process-wide manager. Code that needs plugins takes a ``plugins=`` argument (a
:class:`ZephonPluginManager`); when none is given it calls :func:`default_plugin_manager`, which
builds a fresh manager from the installed entry points. Only the entry-point *scan* is cached
(:func:`entrypoint_plugins`), because it is the one expensive step.
"""

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
    ("operator", "tokenize"): "zephon-tokenize",
    ("operator", "tokenize_chat"): "zephon-tokenize",
    ("operator", "pack_sequences"): "zephon-pack",
    ("operator", "ensure_mixture"): "zephon-tokenize",
    ("runner", "ray"): "zephon-ray",
    ("reader", "jsonl"): "zephon-jsonl",
    ("reader", "parquet"): "zephon-parquet",
    ("reader", "vortex"): "zephon-vortex",
    ("reader", "litdata"): "zephon-litdata",
    ("reader", "mds"): "zephon-mds",
    ("reader", "hf"): "zephon-hf",
    ("reader", "lance"): "zephon-lance",
    ("reader", "webdataset"): "zephon-webdataset",
    **{("operator", op): "zephon-vision" for op in ("decode_image", "resize", "center_crop", "random_resized_crop", "horizontal_flip", "normalize", "patchify")},
    ("demo", "text"): "zephon-demo",
    ("demo", "kernel"): "zephon-demo",
    ("demo", "vlm"): "zephon-vlm-demo",
    **{("observer", name): "zephon-observe" for name in ("manifest", "validate", "autotune")},
    ("command", "profile"): "zephon-observe",
    ("command", "manifest"): "zephon-observe",
    **{("command", c): "zephon-recipes" for c in ("check", "run", "diff", "recipe-schema")},
    **{("command", name): "zephon-storage" for name in ("show", "inspect", "index")},
    ("command", "stubs"): "zephon-stubs",
}
"""First-party names, so a missing plugin's error can say which package to install (``"command"``:
``zephon`` subcommands, which are not registry entries but are named the same way)."""

CONTRIB: frozenset[str] = frozenset(
    {"zephon-demo", "zephon-observe", "zephon-ray", "zephon-recipes", "zephon-stubs", "zephon-torch", "zephon-vlm-demo"}
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
    """Refuse a plugin built for a plugin contract this kernel does not implement.

    The plugin declares ``ZEPHON_CONTRACT = (major, minor)`` (see
    :data:`~zephon_core.hookspecs.PLUGIN_CONTRACT`); one that declares nothing is accepted.

    Raises:
        PluginError: the declaration is malformed, its major differs from the kernel's, or its
            minor is newer; the message names the distribution and both contracts.
    """
    declared = plugin.ZEPHON_CONTRACT if isinstance(plugin, hookspecs.DeclaresContract) else None
    if declared is None:
        return
    from zephon_core import __version__

    kernel = hookspecs.PLUGIN_CONTRACT
    who = f"{package} {version}" if version != "unknown" else package
    if not (
        isinstance(declared, tuple)
        and len(declared) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in declared)
    ):
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
    """One provided reader, operator, runner, demo or field validator."""

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
            if hint:
                msg += f"; {install_hint(hint)}"
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
    """Every installed ``zephon`` entry point, loaded by pluggy once per process.

    Why this, and only this, is cached: walking the metadata of every installed distribution costs
    about 10 ms each time (and, the first time, importing each plugin module), which every
    ``Pipeline`` built without ``plugins=`` would otherwise pay. What is cached cannot leak state
    between managers: plugin modules and the name and version of the package providing each.
    ``rescan=True`` walks again (after installing a package into a running process, or in a test
    that puts a distribution on ``sys.path``). A failed scan is not cached: the next call raises
    again.

    Raises:
        PluginError: an entry point failed to import or register; the message names its package.
    """
    global _scan
    with _scan_lock:
        if _scan is None or rescan:
            _scan = None
            _scan = _load_entrypoints()
        return _scan


def _load_entrypoints() -> tuple[EntryPointPlugin, ...]:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)  # a hookimpl with wrong arguments then fails here, attributed to its package
    try:
        pm.load_setuptools_entrypoints(hookspecs.PROJECT)
    except Exception as exc:
        raise _load_error(pm, exc) from exc
    return tuple(
        EntryPointPlugin(pm.get_name(plugin) or "", plugin, dist.project_name, dist.version)
        for plugin, dist in pm.list_plugin_distinfo()
    )


def _load_error(pm: pluggy.PluginManager, exc: Exception) -> PluginError:
    """Name the entry point and package that made ``load_setuptools_entrypoints`` raise.

    pluggy raises the plugin's own exception with no hint of where it came from. It walks
    ``importlib.metadata.distributions()`` in order and registers each entry point before loading
    the next, so the culprit is the first one, in that same order, that is not registered.
    """
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
    """A pluggy manager plus the registry it fills. Build one per application, CLI call or test.

    Args:
        load_entrypoints: register the installed ``zephon`` entry points (from the scan cached by
            :func:`entrypoint_plugins`). False gives the kernel's own and default plugins only: hermetic tests.
        plugins: more plugin objects (modules, or instances with ``@hookimpl`` methods, e.g. a
            runner configured in code), registered after the entry points.
        block: plugin names not to register: a default plugin's (:mod:`zephon_core.defaults`; the
            essential ones are refused) or an entry point's.

    The registry is filled once, here: a manager is a snapshot, so everything built with the same
    manager sees the same readers, operators, runners and demos.

    Raises:
        PluginError: a plugin failed to load, defines a ``zephon_*`` function that is not a hook,
            or registers something invalid or twice.
    """

    def __init__(
        self, *, load_entrypoints: bool = True, plugins: Iterable[object] | None = None, block: Iterable[str] = ()
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._packages: dict[int, tuple[str, str]] = {}
        from zephon_core import __version__, _kernel, defaults

        for name in defaults.check_block(block):
            self.pm.set_blocked(name)  # a blocked name's plugin (default or entry point) is then not registered
        for own in (_kernel, *defaults.plugins()):
            self._packages[id(own)] = ("zephon-core", __version__)
            self.register_plugin(own, name=own.__name__)
        if load_entrypoints:
            for ep in entrypoint_plugins():
                self._packages[id(ep.plugin)] = (ep.package, ep.version)
                self.register_plugin(ep.plugin, name=ep.name)
        for p in plugins or []:
            self.register_plugin(p)
        self._check_names()
        self.registry = Registry()
        self._collect()

    def register_plugin(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object with pluggy (before the registry is collected, i.e. in ``__init__``).

        A plugin built for another plugin contract (its ``ZEPHON_CONTRACT``) is refused here.
        """
        check_contract(plugin, *self._package_of(plugin))
        try:
            self.pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"plugin {self._package_of(plugin)[0]!r} cannot be registered: {exc}") from exc

    def _package_of(self, plugin: object) -> tuple[str, str]:
        """(package, version) to credit in listings and errors; a plugin object given in code has no
        distribution, so it is named by its module (or its class, for an instance)."""
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

    def _collect(self) -> None:
        for kind in KINDS:  # in this order; each kind's hook is zephon_register_<kind>s
            for impl in getattr(self.pm.hook, f"zephon_register_{kind}s").get_hookimpls():
                package, version = self._package_of(impl.plugin)
                impl.function(register=self._registrar(kind, package, version))

    def _registrar(self, kind: Kind, package: str, version: str) -> Callable[..., None]:
        """The ``register`` callback handed to one plugin's hook.

        Plugins see it as :class:`~zephon_core.hookspecs.Register` (or ``ReaderRegister``,
        ``DemoRegister``); it is checked again here because a plugin need not be type-checked, and
        a mistake should be an error naming the package, not a ``TypeError`` from inside pluggy.
        """
        allowed = {"reader": {"detect", "index"}, "observer": {"check"}}.get(kind, set())

        def register(*args: Any, **kwargs: Any) -> None:
            if args:
                raise PluginError(
                    f"{package}: register() for a {kind} takes keyword arguments only (name=, factory=, ...)"
                )
            missing = [k for k in ("name", "factory") if k not in kwargs]
            if missing:
                raise PluginError(f"{package}: register() for a {kind} is missing {missing}")
            name, factory = kwargs.pop("name"), kwargs.pop("factory")
            description = kwargs.pop("description", "")
            unknown = set(kwargs) - allowed
            if unknown:
                raise PluginError(f"{package}: register() for a {kind} got unknown arguments {sorted(unknown)}")
            if not isinstance(factory, str) and not callable(factory):
                raise PluginError(f"{package}: {kind} {name!r} factory must be callable or 'module:attr'")
            if not isinstance(description, str):
                raise PluginError(f"{package}: {kind} {name!r} description must be a string")
            self.registry.add(Registration(kind, name, factory, package, version, description, kwargs))

        return register

    def add_commands(self, subparsers: Subparsers) -> dict[str, tuple[str, str]]:
        """Let every plugin add its ``zephon`` subcommands (``zephon_register_commands``), kernel first.

        Returns each command's ``(package, version)``, so the CLI can say where a command comes
        from. The hooks run in registration order (the kernel's own and default plugins, then the entry points,
        then plugins given in code), so ``zephon --help`` lists the kernel's commands first.

        Raises:
            PluginError: two packages add a command of the same name (naming both), or a hook failed.
        """
        import argparse  # here, not at the top: building a pipeline never needs it

        owners: dict[str, tuple[str, str]] = {}
        for impl in self.pm.hook.zephon_register_commands.get_hookimpls():
            package, version = self._package_of(impl.plugin)
            before = dict(subparsers.choices)
            try:
                impl.function(subparsers=subparsers)
            except argparse.ArgumentError as exc:  # argparse refuses a name already taken (3.11+)
                name = exc.message.rsplit(" ", 1)[-1]
                other = owners.get(name, ("another plugin", ""))[0]
                raise PluginError(f"{package}: zephon command {name} is added twice: by {other} and by {package}") from exc
            replaced = [n for n, p in before.items() if subparsers.choices.get(n) is not p]
            if replaced:  # older argparse replaces silently
                name = replaced[0]
                raise PluginError(
                    f"{package}: zephon command {name!r} is added twice: by {owners[name][0]} and by {package}"
                )
            for name in [n for n in subparsers.choices if n not in before]:  # in the order added
                owners[name] = (package, version)
        return owners

    def listing(self) -> list[dict[str, str]]:
        """Every registration as rows: name, kind, package, version, description."""
        return [
            {"name": r.name, "kind": r.kind, "package": r.package, "version": r.version, "description": r.description}
            for (_, _), r in sorted(self.registry.items.items())
        ]


def default_plugin_manager() -> ZephonPluginManager:
    """A fresh manager with every installed plugin: what ``plugins=None`` means everywhere.

    Fresh on every call rather than one shared instance, so nothing registered on one manager (a
    runner configured in code, a test's fake plugin) can leak into another pipeline, thread or
    test, and there is no process-wide state to reset. It stays cheap (about a millisecond)
    because the expensive step, the entry-point scan, is cached by :func:`entrypoint_plugins`, and
    factories are lazy strings. Build one manager and pass it (``Pipeline(..., plugins=pm)``,
    ``Dataset.from_path(..., plugins=pm)``) when several objects must agree on exactly one set.
    """
    return ZephonPluginManager()


def get_plugin_manager(*, refresh: bool = False) -> ZephonPluginManager:
    """Deprecated alias of :func:`default_plugin_manager`, kept for existing callers.

    It used to return one process-wide manager; it now returns a fresh one on each call.
    ``refresh`` rescans the installed entry points first.
    """
    if refresh:
        entrypoint_plugins(rescan=True)
    return default_plugin_manager()
