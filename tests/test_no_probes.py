"""No attribute probes of contract members in the kernel: optional capabilities are declared protocols.

A ``getattr(source, "with_window", None)`` hides a member of the WorkSource contract from its
reference page, from type checkers and from plugin authors, and a member spelled differently
silently becomes "not a capability". Every optional member a kernel module asks a work source,
reader, executor, stage, operator, accumulator, plugin or failure about is therefore a
``@runtime_checkable`` protocol next to the contract it extends, checked with ``isinstance``.

What is left of ``getattr(``/``hasattr(`` in ``zephon_core`` is generic Python introspection, listed
in :data:`ALLOWED` with the file, the attribute name (``*`` for a name computed at run time) and why:

* dunder names (``__name__``, ``__module__``, ``__dict__``, ``__len__`` ...) are Python's own, never a
  contract member, and are allowed anywhere;
* platform probes ask a standard-library module (:data:`PLATFORM_MODULES`) whether this OS has a
  function or flag, and are allowed anywhere too;
* lazy re-export modules and wrapper proxies look a name up on the module or object they forward to;
* a few look-ups read the kernel's own records (dataclass fields by name, a cache attribute that a
  pickle from an earlier release may lack, pluggy's hook by name).

A new probe fails :func:`test_no_new_probes_in_the_kernel` naming its file, line and attribute; a
listed entry the code no longer needs fails :func:`test_allow_list_has_no_stale_entries`, so the list
only shrinks. :func:`test_a_deliberate_probe_is_reported` shows the scanner catching one.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "zephon_core"
PROBES = ("getattr", "hasattr")
DYNAMIC = "*"
PLATFORM_MODULES = frozenset({"os", "select", "socket", "sys", "forkserver"})
"""Standard-library modules whose functions and flags depend on the platform (``getattr(select, "POLLRDHUP", 0)``)."""


@dataclass(frozen=True)
class Probe:
    """One ``getattr(``/``hasattr(`` call: where it is and which attribute it names."""

    file: str
    line: int
    attr: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: getattr/hasattr of {self.attr!r}"


ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    # (file relative to the repository, attribute or "*"): (how many, why it is not a contract probe)
    ("zephon_core/__init__.py", DYNAMIC): (1, "lazy re-export of the public names"),
    ("zephon_core/plugin_api.py", DYNAMIC): (1, "lazy re-export of the plugin API"),
    ("zephon_core/conformance/__init__.py", DYNAMIC): (1, "lazy re-export of the conformance suite"),
    ("zephon_core/work/moved.py", DYNAMIC): (1, "forwards moved modules to their new home"),
    ("zephon_core/builder_methods.py", DYNAMIC): (2, "operator methods dispatch by registered name"),
    ("zephon_core/plugins.py", DYNAMIC): (3, "resolves 'module:attr' references; finds misspelled hooks; hook by kind"),
    ("zephon_core/defaults/__init__.py", DYNAMIC): (1, "a default plugin's registration hook by kind"),
    ("zephon_core/plugins.py", "relpath"): (1, "fsspec filesystems without relpath (third-party API)"),
    ("zephon_core/runtime/lifecycle.py", DYNAMIC): (1, "iterator proxy forwards to the engine"),
    ("zephon_core/work/prefetch.py", DYNAMIC): (1, "work-source proxy forwards to the source"),
    ("zephon_core/defaults/sources/steering.py", DYNAMIC): (1, "work-source proxy forwards to the source"),
    ("zephon_core/work/contract.py", DYNAMIC): (1, "names the required members a non-WorkSource lacks"),
    ("zephon_core/checkpoint/schema.py", DYNAMIC): (2, "reads a dataclass's fields by name"),
    ("zephon_core/work/dataset.py", "_ends"): (1, "cache a Dataset pickled by 0.1 lacks"),
    ("zephon_core/runtime/metrics.py", "name"): (1, "thread-local cache"),
    ("zephon_core/runtime/forkserver.py", DYNAMIC): (1, "walks a dataclass's fields by name"),
    ("zephon_core/conformance/operator_isolation.py", "func"): (1, "functools.partial's wrapped function"),
}


def is_dunder(name: str) -> bool:
    """Python's own attribute names (``__module__``): generic introspection, never a contract member."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def is_probe(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES


def receiver_root(node: ast.expr) -> str | None:
    """The name an expression starts from: ``socket`` for ``socket.socket``, ``forkserver`` for
    ``getattr(forkserver, "_forkserver", None)``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and is_probe(node) and node.args:
            node = node.args[0]
        else:
            return None


def probes_in(source: str, file: str) -> list[Probe]:
    """Every ``getattr(``/``hasattr(`` call in ``source``, but of a dunder or on a platform module."""
    found = []
    for node in ast.walk(ast.parse(source, filename=file)):
        if not is_probe(node):
            continue
        assert isinstance(node, ast.Call)
        if len(node.args) < 2 or receiver_root(node.args[0]) in PLATFORM_MODULES:
            continue
        name = node.args[1]
        attr = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else DYNAMIC
        if not is_dunder(attr):
            found.append(Probe(file, node.lineno, attr))
    return found


def kernel_probes() -> list[Probe]:
    found = []
    for path in sorted(KERNEL.rglob("*.py")):
        found += probes_in(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    return found


def unexpected(probes: list[Probe], allowed: dict[tuple[str, str], tuple[int, str]]) -> list[str]:
    """The probes beyond what :data:`ALLOWED` lists for their file and attribute (all of them, named)."""
    counts = Counter((p.file, p.attr) for p in probes)
    return [
        f"{p} (a probe of a contract member? declare a runtime-checkable Protocol and use isinstance; "
        "generic introspection: add it to ALLOWED in tests/test_no_probes.py with the reason)"
        for p in probes
        if counts[(p.file, p.attr)] > allowed.get((p.file, p.attr), (0, ""))[0]
    ]


def test_no_new_probes_in_the_kernel() -> None:
    problems = unexpected(kernel_probes(), ALLOWED)
    assert not problems, "\n".join(problems)


def test_allow_list_has_no_stale_entries() -> None:
    counts = Counter((p.file, p.attr) for p in kernel_probes())
    stale = [
        f"{f} {a!r}: {n} allowed, {counts[(f, a)]} found" for (f, a), (n, _) in ALLOWED.items() if counts[(f, a)] < n
    ]
    assert not stale, "ALLOWED lists probes the code no longer has; lower or remove them:\n" + "\n".join(stale)


def test_a_deliberate_probe_is_reported() -> None:
    snippet = (
        "def bind(source, fn, module, name):\n"
        "    label = getattr(fn, '__qualname__', None), hasattr(os, 'memfd_create')\n"  # introspection, platform
        "    value = getattr(module, name)\n"  # lazy re-export, allowed in this file below
        "    return getattr(source, 'with_window', None), hasattr(source, 'plan_version')\n"
    )
    probes = probes_in(snippet, "zephon_core/example.py")
    assert [(p.line, p.attr) for p in probes] == [(3, DYNAMIC), (4, "with_window"), (4, "plan_version")]
    problems = unexpected(probes, {("zephon_core/example.py", DYNAMIC): (1, "lazy re-export")})
    assert len(problems) == 2
    assert "zephon_core/example.py:4: getattr/hasattr of 'with_window'" in problems[0]
    assert "'plan_version'" in problems[1]
    assert unexpected(probes[:1], {}) and not unexpected(probes[:1], {("zephon_core/example.py", DYNAMIC): (1, "")})


def test_the_protocols_that_replaced_probes_answer_as_the_probes_did() -> None:
    """Each capability says yes exactly where the attribute probe it replaced did."""
    from types import SimpleNamespace

    import numpy as np

    from zephon_core.defaults.operators.mapping import PassThrough
    from zephon_core.hookspecs import DeclaresContract
    from zephon_core.ops.contract import Records, ReportsState
    from zephon_core.runtime.flow import message_nbytes
    from zephon_core.runtime.types import SampleBatch
    from zephon_core.work.readers import MemoryReader, prefetches

    class Warming(MemoryReader):
        def prefetch(self, shards: object) -> None:
            pass

    class Duck:
        def prefetch(self, shards: object) -> None:
            pass

    records = [{"x": 1}]
    assert not prefetches(MemoryReader(records, 1)), "the base class's prefetch does nothing: not a capability"
    assert prefetches(Warming(records, 1)) and prefetches(Duck()) and not prefetches(object())

    assert isinstance(SimpleNamespace(ZEPHON_CONTRACT=(1, 0)), DeclaresContract)
    assert not isinstance(SimpleNamespace(hooks=()), DeclaresContract)

    assert isinstance(PassThrough(), ReportsState)
    assert not isinstance(SimpleNamespace(push=print, flush=print), ReportsState)

    body = Records([{"x": np.zeros(4, np.int64)}], [0], [(0,)])
    assert message_nbytes(body) == 32
    assert message_nbytes(SampleBatch(0, 0, {"x": np.zeros(3, np.int32)}, [(0,)])) == 12
    assert message_nbytes(SimpleNamespace(payloads=body.payloads)) == 64, "only kernel bodies are measured"
