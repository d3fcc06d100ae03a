"""``zephon stubs``: a complete stub package (every public name) whose Pipeline declares the plugin
operators, checked by running mypy on code that must pass and code that must fail."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from zephon_stubs.generate import package_stub, pipeline_stub, write_stubs

import zephon_core
from zephon_core.builder_methods import OperatorMethod
from zephon_core.pipeline import Options, Pipeline
from zephon_core.plugins import ZephonPluginManager, default_plugin_manager


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def test_the_package_stub_keeps_every_public_name() -> None:
    tree = ast.parse(package_stub())
    exported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert exported == set(zephon_core.__all__)
    declared_all = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")
    assert ast.literal_eval(declared_all.value) == sorted(zephon_core.__all__)


def test_the_pipeline_stub_is_the_real_module_plus_plugin_operators(tmp_path: Path) -> None:
    plugins = default_plugin_manager()
    text = pipeline_stub(plugins)
    tree = ast.parse(text)
    methods = _methods(_class(tree, "Pipeline"))
    own = {n for n, v in vars(Pipeline).items() if not n.startswith("_") and not isinstance(v, OperatorMethod)}
    assert own <= set(methods), sorted(own - set(methods))
    assert "__getattr__" not in methods, "a catch-all would hide misspelled operators from type checkers"
    for name in plugins.registry.names("operator"):
        assert name in methods, name
    if "tokenize" in methods:
        args = [a.arg for a in methods["tokenize"].args.args + methods["tokenize"].args.kwonlyargs]
        assert {"tokenizer_id", "field", "parallelism"} <= set(args)
        assert "zephon-tokenize" in (ast.get_docstring(methods["tokenize"]) or "")
    options = _class(tree, "Options")
    fields = {ast.unparse(s.target) for s in options.body if isinstance(s, ast.AnnAssign)}
    assert fields == {f.name for f in dataclasses.fields(Options)}
    path = write_stubs(tmp_path, plugins)
    assert path.read_text() == text
    assert (tmp_path / "zephon_core" / "__init__.pyi").read_text() == package_stub()


PASSES = """
    from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

    ds = Dataset.from_records("a", [{"text": "x"}] * 10, 5)
    source = StaticMixtureWorkSource([ds], chunk_size=4)
    p = Pipeline(source).tokenize("gpt2", field="text", max_length=128).shuffle(64, seed=1).batch(8)
    p = p.options(lanes=4, timeout_s=None, runner="threads")
    for batch in p:
        print(batch.data)
"""

FAILS = {
    "Pipeline(source).options(lanse=4)": r'Unexpected keyword argument "lanse" for "options"',
    'Pipeline(source).options(lanes="4")': r'Argument "lanes" to "options" of "Pipeline" has incompatible type "str"',
    'Pipeline(source).tokenize("gpt2", feild="text")': r'Unexpected keyword argument "feild" for "tokenize"',
    'Pipeline(source).tokenize("gpt2", max_length="long")': r'Argument "max_length" to "tokenize"',
    'Pipeline(source).tokenise("gpt2")': r'"Pipeline" has no attribute "tokenise"',
    'StaticMixtureWorkSource("not a list of datasets")': r'Argument 1 to "StaticMixtureWorkSource"',
}


@pytest.mark.slow  # one mypy run over zephon_core's import graph: about 6 s of CPU
def test_mypy_with_the_generated_stub_accepts_good_code_and_flags_mistakes(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    pytest.importorskip("zephon_tokenize")
    write_stubs(tmp_path / "typings", default_plugin_manager())
    (tmp_path / "good.py").write_text(textwrap.dedent(PASSES))
    lines = [
        "from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource",
        'source = StaticMixtureWorkSource([Dataset.from_records("a", [{"text": "x"}], 1)])',
        *FAILS,
    ]
    (tmp_path / "bad.py").write_text("\n".join(lines) + "\n")
    # The real package is read from its folder (an editable install is invisible to mypy); its own
    # modules are not what is checked here, the two stub modules and the scripts are.
    real = Path(zephon_core.__file__).parent.parent
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nmypy_path = {tmp_path / 'typings'}:{real}\nstrict = True\ncache_dir = {tmp_path / 'cache'}\n"
        "[mypy-zephon_core.*]\nfollow_imports = silent\n"
        "[mypy-zephon_core.pipeline]\nfollow_imports = normal\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "good.py", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not [e for e in errors if not e.startswith("bad.py:")], out
    for lineno, (code, expected) in enumerate(FAILS.items(), start=3):
        assert any(e.startswith(f"bad.py:{lineno}:") and re.search(expected, e) for e in errors), (code, out)
    assert len(errors) == len(FAILS), out


def test_the_operators_of_the_stub_follow_the_manager_it_is_given() -> None:
    bare = ZephonPluginManager(load_entrypoints=False)
    methods = _methods(_class(ast.parse(pipeline_stub(bare)), "Pipeline"))
    assert "tokenize" not in methods and "shuffle" in methods
