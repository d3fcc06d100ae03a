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
    rows = [...]
    -->

Pages whose every block another test runs are listed in ``RUN_ELSEWHERE``.
"""

from __future__ import annotations

import os
import re
import subprocess
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
def test_page_examples_run(name: str, tmp_path: Path) -> None:
    if name in RUN_ELSEWHERE:
        assert (ROOT / RUN_ELSEWHERE[name]).is_file()
        pytest.skip(f"run by {RUN_ELSEWHERE[name]}")
    page = DOCS / name
    runnable = [b for b in blocks(page) if b.mark is None]
    if not runnable:
        pytest.skip("every block is marked skip or elsewhere")
    setup = "\n".join(m["code"] for m in _SETUP.finditer(page.read_text()))
    # each block keeps its page line numbers in tracebacks
    parts = [f"exec(compile({setup!r}, {str(page)!r}, 'exec'))"] if setup else []
    parts += [f"exec(compile({_at_line(b)!r}, {str(page)!r}, 'exec'))" for b in runnable]
    script = tmp_path / "docs_example.py"
    script.write_text("\n".join(parts) + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    hint = f"\n(a block of docs/{name} that cannot run here gets a `<!-- docs-test: skip REASON -->` line before it)"
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] + hint
