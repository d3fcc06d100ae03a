"""Every ``python`` block of the guides in docs/ runs, or says why not.

For each page, the python blocks run in order in one namespace (a later block uses an earlier one's
names), in a fresh interpreter whose working directory is a temporary folder, so nothing of the test
session leaks in. An HTML comment right before a block (invisible on the site, visible in the source)
changes that:

* ``<!-- docs-test: skip REASON -->``: the block is not run; REASON says why (it needs a GPU cluster,
  a cloud bucket, the user's own trainer, ...).
* ``<!-- docs-test: elsewhere tests/test_x.py -->``: another test runs this block, with what it needs.

A page may also hold setup the reader does not need to see, run before its blocks::

    <!-- docs-test: setup
    write_sample_files("data/")
    -->

**What hidden setup may do.** Every guide's code must run as a reader sees it, so a hidden block only
prepares what a reader would already have: files on disk (sample datasets, a config file), the
environment. It never provides a *name*: every name a visible block reads must be bound by a
visible block at or before that statement (imports included) or be a builtin. Two checks hold the
rule: :func:`test_visible_code_needs_no_hidden_name` reads every page's visible blocks (skipped ones
too: the reader sees them) statement by statement and fails on a name that only hidden setup binds;
and :func:`test_page_examples_run` runs the setup in a namespace of its own, so a visible block that
needed one of its names fails with the reader's own ``NameError``. On a page with hidden setup every
visible block must parse as Python, or the first check could not see what it reads.

Pages whose every block another test runs are listed in ``RUN_ELSEWHERE``.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
import symtable
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

RUN_ELSEWHERE = {
    "shuffling.md": "tests/test_docs_pages.py",
    "curricula.md": "tests/test_docs_pages.py",
    "writing-an-operator.md": "tests/test_docs.py",
}
"""Pages whose python blocks another test runs, all of them, in its own set-up."""

_BLOCK = re.compile(
    r"(?:<!--\s*docs-test:\s*(?P<mark>skip|elsewhere)\b(?P<why>.*?)-->\s*\n)?^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```",
    flags=re.S | re.M,
)
_SETUP = re.compile(r"<!--\s*docs-test:\s*setup\s*\n(?P<code>.*?)-->", flags=re.S)


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    mark: str | None
    why: str


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(text.count("\n", 0, m.start("code")) + 1, m["code"], m["mark"], (m["why"] or "").strip())
        for m in _BLOCK.finditer(text)
    ]


def _at_line(b: Block) -> str:
    return "\n" * (b.line - 1) + b.code


def setups(page: Path) -> list[Block]:
    """The page's hidden ``docs-test: setup`` blocks, with the page line their code starts on."""
    text = page.read_text()
    return [Block(text.count("\n", 0, m.start("code")) + 1, m["code"], "setup", "") for m in _SETUP.finditer(text)]


def names_of(statement: ast.stmt) -> tuple[set[str], set[str]]:
    """``(read, bound)``: the module-level names one top-level statement reads and binds.

    Read: names referenced at module level, and globals referenced inside the functions, classes,
    lambdas and comprehensions it defines (a function body reads them when called, later, but a
    reader still needs them to exist). Bound: names it assigns, imports, defines or binds with
    ``for``/``with``/``except ... as``.
    """
    table = symtable.symtable(ast.unparse(statement), "<docs>", "exec")
    read = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    nested = list(table.get_children())
    while nested:
        scope = nested.pop()
        read |= {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
        nested += scope.get_children()
    return read, bound


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Delete, ast.Assert, ast.Raise, ast.Return)


def hidden_names_used(page: Path) -> list[str]:
    """Where a visible block of ``page`` reads a name that only its hidden setup binds (module docstring)."""
    hidden: set[str] = set()
    for b in setups(page):
        for statement in ast.parse(b.code).body:
            hidden |= names_of(statement)[1]
    hidden -= set(dir(builtins))
    if not hidden:
        return []
    problems: list[str] = []
    seen: set[str] = set()  # bound by the visible code so far
    for b in blocks(page):
        try:
            tree = ast.parse(b.code)
        except SyntaxError as exc:
            problems.append(f"docs/{page.name}:{b.line}: a block on a page with hidden setup does not parse ({exc.msg})")
            continue
        for statement in tree.body:
            read, bound = names_of(statement)
            # a simple statement reads before it binds (`ws = ws + 1` needs ws); a compound one may
            # read what it binds itself (a loop variable, a recursive function's own name)
            own = set() if isinstance(statement, _SIMPLE) else bound
            leaked = sorted((read - seen - own) & hidden)
            if leaked:
                problems.append(
                    f"docs/{page.name}:{b.line + statement.lineno - 1}: uses {', '.join(leaked)}, defined only in a "
                    "hidden `docs-test: setup` block the reader never sees; define it in a visible block "
                    "(hidden setup may only write files)"
                )
            seen |= bound
    return problems


def _pages() -> list[str]:
    return sorted(p.name for p in DOCS.glob("*.md") if blocks(p))


def test_every_marked_block_says_why() -> None:
    for name in _pages():
        for b in blocks(DOCS / name):
            if b.mark:
                assert b.why, f"docs/{name}:{b.line}: a docs-test: {b.mark} comment needs a reason"
            if b.mark == "elsewhere":
                test = b.why.split()[0]
                assert (ROOT / test).is_file(), f"docs/{name}:{b.line}: {test} does not exist"


@pytest.mark.parametrize("name", _pages())
def test_visible_code_needs_no_hidden_name(name: str) -> None:
    problems = hidden_names_used(DOCS / name)
    assert not problems, "\n".join(problems)


def test_the_hidden_name_check_sees_what_a_reader_would_miss(tmp_path: Path) -> None:
    """The rule on a made-up page: a hidden name read at top level, inside a function, or before
    the visible code binds it is reported; files the setup wrote and names rebound visibly are not."""
    fence = "`" * 3
    page = tmp_path / "guide.md"
    page.write_text(
        "<!-- docs-test: setup\nimport json\nws = 1\nrows = [1]\nopen('data.json', 'w').write(json.dumps(rows))\n-->\n"
        f"{fence}python\nimport json\nrows = json.load(open('data.json'))\nfor r in rows:\n    print(r)\n{fence}\n"
        f"{fence}python\ndef build():\n    return ws\n{fence}\n"
        f"{fence}python\nws = ws + 1\n{fence}\n"
    )
    problems = hidden_names_used(page)
    assert [p.split(": ")[0] for p in problems] == ["docs/guide.md:14", "docs/guide.md:18"], problems
    assert all(": uses ws, defined only in a hidden" in p for p in problems), problems


@pytest.mark.parametrize("name", _pages())
def test_page_examples_run(name: str, tmp_path: Path) -> None:
    if name in RUN_ELSEWHERE:
        assert (ROOT / RUN_ELSEWHERE[name]).is_file()
        pytest.skip(f"run by {RUN_ELSEWHERE[name]}")
    page = DOCS / name
    runnable = [b for b in blocks(page) if b.mark is None]
    if not runnable:
        pytest.skip("every block is marked skip or elsewhere")
    # each block keeps its page line numbers in tracebacks; the setup runs in a namespace of its own,
    # so the visible blocks see only what they define themselves, as the reader's do
    parts = ["_setup_namespace = {'__name__': '__docs_setup__'}"]
    parts += [f"exec(compile({_at_line(b)!r}, {str(page)!r}, 'exec'), _setup_namespace)" for b in setups(page)]
    parts += ["del _setup_namespace"]
    parts += [f"exec(compile({_at_line(b)!r}, {str(page)!r}, 'exec'))" for b in runnable]
    script = tmp_path / "docs_example.py"
    script.write_text("\n".join(parts) + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    hint = f"\n(a block of docs/{name} that cannot run here gets a `<!-- docs-test: skip REASON -->` line before it)"
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] + hint
