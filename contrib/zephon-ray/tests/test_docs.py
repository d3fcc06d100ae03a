"""The runnable example of docs/ray.md runs as written, on the session's Ray instance."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "ray.md"


@pytest.mark.usefixtures("ray_session")
def test_ray_guide_example_runs():
    if not DOC.exists():
        pytest.skip("docs/ray.md is not next to this checkout (package tested on its own)")
    blocks = re.findall(r"```python ray-example\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "ray_doc_example"})
    assert re.fullmatch(r"\d+ rows\n", out.getvalue()) and int(out.getvalue().split()[0]) > 100


def test_option_table_lists_every_option():
    if not DOC.exists():
        pytest.skip("docs/ray.md is not next to this checkout")
    from zephon_ray.options import FIELDS

    text = DOC.read_text()
    for name in FIELDS:
        assert f"| `{name}` | `ZEPHON_RAY_{name.upper()}`" in text, f"docs/ray.md does not document option {name!r}"
