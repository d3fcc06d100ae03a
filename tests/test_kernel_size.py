"""The kernel stays small enough to read: line budgets for the package, the kernel proper and each module.

A newcomer or a plugin author reads the kernel to learn what it promises, so its size is a property
worth holding, like its layers (:mod:`tests.test_layers`, whose :data:`~tests.test_layers.LAYERS`
this test reuses to tell the kernel proper from the rest). Three budgets, in lines as ``wc -l``
counts them:

* the whole ``zephon_core`` package (conformance suite, default plugins, CLI and the light testing
  kit included): :data:`PACKAGE_BUDGET`;
* the kernel proper, every module below the default plugins' code, the observers and the surface
  (the foundation, contracts, registry, work, checkpoint, runtime and builder layers), except the
  modules that only forward a 0.1.0 import path to a new home: :data:`KERNEL_BUDGET`;
* any one module: :data:`MODULE_BUDGET`.

Each rule is shown failing on a deliberate violation in a small fake kernel.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.kernel_imports import KERNEL, Layers, kernel_modules, layer_of
from tests.test_layers import LAYERS, _fake_kernel

PACKAGE_BUDGET = 13_500
KERNEL_BUDGET = 8_000
MODULE_BUDGET = 500
NOT_KERNEL_PROPER = frozenset({"defaults", "observers", "surface"})
"""The layers outside the kernel proper: what is built on it or registered through its hooks."""


def only_forwards(tree: ast.Module) -> bool:
    """Whether a module is a docstring, imports and ``__getattr__``/``__all__`` assignments only (a former path)."""
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
    return (
        bool(body)
        and all(
            isinstance(node, (ast.Import, ast.ImportFrom))
            or (
                isinstance(node, ast.Assign)
                and all(isinstance(t, ast.Name) and t.id in ("__getattr__", "__all__") for t in node.targets)
            )
            for node in body
        )
        and any(isinstance(node, ast.Assign) for node in body)
    )


def line_counts(kernel: Path, layers: Layers) -> tuple[Counter[str], dict[str, int]]:
    """Lines per part (``package``, ``kernel``, ``forwarding``, and each layer) and per module file."""
    parts: Counter[str] = Counter()
    per_module: dict[str, int] = {}
    for name, path in kernel_modules(kernel).items():
        text = path.read_text()
        n = len(text.splitlines())
        per_module[path.relative_to(kernel.parent).as_posix()] = n
        parts["package"] += n
        index = layer_of(name, layers)
        layer = layers[index][0] if index is not None else "unplaced"
        parts[layer] += n
        if layer in NOT_KERNEL_PROPER:
            continue
        parts["forwarding" if only_forwards(ast.parse(text)) else "kernel"] += n
    return parts, per_module


def size_violations(kernel: Path, layers: Layers, package: int, proper: int, module: int) -> list[str]:
    """Every budget broken, one line each, naming the budget and the figure."""
    parts, per_module = line_counts(kernel, layers)
    out = []
    if parts["package"] > package:
        out.append(f"zephon_core is {parts['package']} lines, over its budget of {package}")
    if parts["kernel"] > proper:
        out.append(f"the kernel proper is {parts['kernel']} lines, over its budget of {proper}")
    out += [f"{path} is {n} lines, over the module budget of {module}" for path, n in per_module.items() if n > module]
    return out


def test_the_kernel_keeps_its_line_budgets() -> None:
    parts, _ = line_counts(KERNEL, LAYERS)
    print("\nzephon_core lines:", dict(sorted(parts.items())))
    assert size_violations(KERNEL, LAYERS, PACKAGE_BUDGET, KERNEL_BUDGET, MODULE_BUDGET) == []


def test_each_budget_fails_when_broken(tmp_path: Path) -> None:
    kernel = _fake_kernel(
        tmp_path,
        {
            "pipeline.py": "x = 1\n" * 30,  # builder: kernel proper
            "cli.py": "y = 2\n" * 30,  # surface: counted in the package only
            "ops/mapping.py": '"""former path"""\nfrom a import forward\n__getattr__ = forward("b")\n',
        },
    )
    assert size_violations(kernel, LAYERS, 100, 100, 100) == []
    parts, _ = line_counts(kernel, LAYERS)
    assert (parts["kernel"], parts["forwarding"], parts["package"]) == (30, 3, 63)
    assert size_violations(kernel, LAYERS, 60, 100, 100) == ["zephon_core is 63 lines, over its budget of 60"]
    assert size_violations(kernel, LAYERS, 100, 29, 100) == ["the kernel proper is 30 lines, over its budget of 29"]
    assert size_violations(kernel, LAYERS, 100, 100, 29) == [
        "zephon_core/cli.py is 30 lines, over the module budget of 29",
        "zephon_core/pipeline.py is 30 lines, over the module budget of 29",
    ]
