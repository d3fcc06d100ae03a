"""``zephon stubs``: a valid stub declaring every installed plugin operator with its parameters."""

from __future__ import annotations

import ast

from zephon_core.plugins import default_plugin_manager
from zephon_core.stubs import pipeline_stub, write_stubs


def test_the_stub_declares_plugin_operators_and_parses(tmp_path):
    plugins = default_plugin_manager()
    text = pipeline_stub(plugins)
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    for name in plugins.registry.names("operator"):
        if name not in {"map_transform", "flat_map", "stateful_transform", "shuffle"}:
            assert name in methods, name
    if "tokenize" in methods:
        args = [a.arg for a in methods["tokenize"].args.args + methods["tokenize"].args.kwonlyargs]
        assert {"tokenizer_id", "field", "parallelism"} <= set(args)
    path = write_stubs(tmp_path, plugins)
    assert path.read_text() == text and (tmp_path / "zephon_core" / "__init__.pyi").exists()
