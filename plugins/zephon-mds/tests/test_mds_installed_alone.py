"""zephon-mds installed alone (kernel + its declared dependencies only) reads MDS data.

One shared development environment hides a missing dependency, so this builds a fresh virtual
environment with ``pip install <kernel>`` then ``pip install plugins/zephon-mds`` and reads a
fixture there. It also proves the point of the plugin: no torch, no mosaicml-streaming, no pyarrow installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PLUGIN = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import base64, importlib.util, json, sys
    from decimal import Decimal
    import numpy as np
    from zephon_core import Dataset, Pipeline, ReaderError, StaticMixtureWorkSource

    data = sys.argv[1]
    for mod in ("torch", "litdata", "pyarrow", "streaming"):
        assert importlib.util.find_spec(mod) is None, f"{mod} is installed"

    def tag(v):
        if isinstance(v, dict):
            return {k: tag(x) for k, x in v.items()}
        if isinstance(v, list):
            return [tag(x) for x in v]
        if isinstance(v, bytes):
            return {"$bytes": base64.b64encode(v).decode()}
        if isinstance(v, np.ndarray):
            return {"$ndarray": v.tolist(), "dtype": str(v.dtype), "shape": list(v.shape)}
        if isinstance(v, np.generic):
            return {"$scalar": v.item(), "dtype": str(v.dtype)}
        if isinstance(v, Decimal):
            return {"$decimal": str(v)}
        return v

    for variant in ("plain", "zstd", "gz"):
        ds = Dataset.from_path(variant, f"{data}/{variant}")
        want = json.load(open(f"{data}/{variant}.expected.json"))["samples"]
        got = [tag(r) for s, i in enumerate(ds.shards) for r in ds.reader.read(s, np.arange(i.num_samples))]
        assert got == want, variant

    ds = Dataset.from_path("d", f"{data}/zstd")
    pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(lambda r: {"id": r["id"]}).batch(8)
    with pipe:
        n = sum(len(b) for b in pipe)
    assert n >= 100, n
    try:
        Dataset.from_path("p", f"{data}/pickled")
    except ReaderError as exc:
        assert "unpickling" in str(exc), exc
    else:
        raise AssertionError("pkl column accepted?")
    print("installed-alone OK", n)
    """
)


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.slow
def test_installed_alone_with_declared_dependencies(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, str(REPO)])
    _run([*pip, str(PLUGIN)])
    env = {**os.environ, "ZEPHON_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": ""}
    proc = _run([py, "-c", SCRIPT, str(PLUGIN / "tests" / "fixtures" / "data")], env=env, cwd=str(tmp_path))
    assert "installed-alone OK" in proc.stdout
    listed = _run([str(venv / "bin" / "zephon"), "plugins", "--kind", "reader"], env=env).stdout
    assert "mds" in listed and "zephon-mds" in listed
