"""The plugin template: render both kinds, install them the way the docs say, pass the suite, then
break a rule in the generated operator and watch its own tests fail naming that rule.

zephon-core is on no package index yet, so a plugin author installs it from a wheelhouse: the
commands in docs/publishing-a-plugin.md ("Start from the template"), repeated in the generated
README and CI workflow. The slow case runs those commands as written, in a fresh virtual
environment outside the checkout, with the kernel's wheel as the only thing taken from it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from zephon_testkit.isolated import build_wheels, new_venv, pip_install

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "publishing-a-plugin.md"


def _run(cmd: list[str], cwd: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """Run outside this test session: no pytest, virtualenv or PYTHONPATH settings leak into ``cmd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV")) and k != "PYTHONPATH"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _render(out: Path, kind: str) -> Path:
    cookiecutter = pytest.importorskip("cookiecutter.main")
    return Path(cookiecutter.cookiecutter(str(ROOT / "cookiecutter"), no_input=True, output_dir=str(out),
                                          extra_context={"kind": kind}))


def _commands(text: str) -> list[str]:
    """The shell commands of ``text``'s lines, without comments or surrounding whitespace."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def _bash_commands(markdown: str) -> list[list[str]]:
    """Every command of the ```` ```bash ```` blocks of a Markdown text, split into words."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    return [shlex.split(c) for block in blocks for c in _commands(block)]


def _docs_commands() -> tuple[list[str], list[str]]:
    """The docs' wheel-building and install commands (from the block that starts ``cd zephon-<name>``)."""
    blocks = re.findall(r"```bash\n(cd zephon-<name>\n.*?)```", DOCS.read_text(), flags=re.S)
    assert len(blocks) == 1, f"{DOCS.name}: expected one bash block starting with `cd zephon-<name>`"
    wheel = [c for c in _commands(blocks[0]) if c.startswith("python -m pip wheel")]
    install = [c for c in _commands(blocks[0]) if c.startswith("pip install")]
    assert len(wheel) == 1 and len(install) == 1, f"{DOCS.name}: {blocks[0]}"
    return shlex.split(wheel[0]), shlex.split(install[0])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Both kinds rendered once with the defaults, for the fast checks."""
    out = tmp_path_factory.mktemp("rendered")
    return [_render(out, kind) for kind in ("operator", "reader")]


def test_generated_readme_and_ci_install_as_the_docs_say(rendered: list[Path]) -> None:
    """The commands a plugin author reads in three places are the same (the slow case runs them)."""
    wheel, install = _docs_commands()
    assert wheel[:3] == ["python", "-m", "pip"] and "--no-deps" in wheel, wheel
    assert "--find-links" in install and install[-2:] == ["-e", ".[test]"], install
    for pkg in rendered:
        readme = _bash_commands((pkg / "README.md").read_text())
        for cmd in (wheel, install):
            assert cmd in readme, f"{pkg.name}/README.md lacks `{shlex.join(cmd)}`: {readme}"
        ci = (pkg / ".github/workflows/ci.yml").read_text()
        runs = [shlex.split(c) for c in re.findall(r"^\s*- run: (.*)$", ci, flags=re.M)]
        assert install in runs, f"{pkg.name}/.github/workflows/ci.yml does not run `{shlex.join(install)}`: {runs}"
        assert "pip install zephon" not in (pkg / "README.md").read_text()


def test_generated_requirement_admits_this_kernel(rendered: list[Path]) -> None:
    """The template's zephon-core range contains the kernel's version, so the wheelhouse satisfies it."""
    kernel = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for pkg in rendered:
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]
        reqs = [Requirement(d) for d in meta["dependencies"] if Requirement(d).name == "zephon-core"]
        assert len(reqs) == 1, meta["dependencies"]
        assert reqs[0].url is None, f"{meta['name']}: PyPI refuses a direct reference: {reqs[0]}"
        assert reqs[0].specifier.contains(kernel), f"{meta['name']}: {reqs[0]} excludes zephon-core {kernel}"


def _installed_from(report: dict[str, Any], name: str) -> str:
    """Where pip's ``--report`` says it took ``name`` from (a URL)."""
    for item in report["install"]:
        if item["metadata"]["name"].lower() == name:
            return str(item["download_info"]["url"])
    raise AssertionError(f"pip did not install {name}: {[i['metadata']['name'] for i in report['install']]}")


@pytest.mark.slow
def test_template_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "out"
    op_pkg, reader_pkg = _render(out, "operator"), _render(out, "reader")
    assert (op_pkg.name, reader_pkg.name) == ("zephon-dedupe", "zephon-csv")
    assert (op_pkg / ".github/workflows/ci.yml").exists() and (reader_pkg / "src/zephon_csv/reader.py").exists()
    assert not (op_pkg / "src/zephon_dedupe/reader.py").exists()

    # The docs' first step, `python -m pip wheel --no-deps --wheel-dir wheels path/to/zephon`: the same
    # wheel, built once (see zephon_testkit.isolated), copied into each plugin's wheels/.
    wheel_cmd, install_cmd = _docs_commands()
    wheel_dir = wheel_cmd[wheel_cmd.index("--wheel-dir") + 1]
    assert wheel_cmd[-2:] == ["path/to/zephon", "path/to/zephon/plugins/zephon-storage"], wheel_cmd
    kernel, storage = build_wheels([ROOT, ROOT / "plugins" / "zephon-storage"], tmp_path / "built")
    for pkg in (op_pkg, reader_pkg):
        (pkg / wheel_dir).mkdir()
        for wheel in (kernel, storage):
            shutil.copy2(wheel, pkg / wheel_dir / wheel.name)

    # The docs' install command as written, in each plugin's folder, into one bare venv that this
    # interpreter's pip fills: zephon-core only from wheels/, its dependencies from the index.
    python = new_venv(tmp_path / "venv")
    py = str(python)
    assert install_cmd[:2] == ["pip", "install"]
    for pkg in (op_pkg, reader_pkg):
        report = tmp_path / f"{pkg.name}-report.json"
        res = _run([*pip_install(python), *install_cmd[2:], "--report", str(report)], cwd=pkg)
        assert res.returncode == 0, f"{pkg.name}: {shlex.join(install_cmd)}\n{res.stderr[-3000:]}"
        if pkg is op_pkg:
            origin = _installed_from(json.loads(report.read_text()), "zephon-core")
            assert origin == (pkg / wheel_dir / kernel.name).as_uri(), origin
    res = _run([py, "-c", "import zephon_core; print(zephon_core.__file__)"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    where = Path(res.stdout.strip()).resolve()
    assert where.is_relative_to((tmp_path / "venv").resolve()) and not where.is_relative_to(ROOT), where

    for pkg in (op_pkg, reader_pkg):
        res = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zephon-examples=2"], cwd=pkg)
        assert res.returncode == 0, f"{pkg.name}:\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
        assert " passed" in res.stdout

    # Break rule 3 in the (editable) operator: randomness from the global generator.
    src = op_pkg / "src/zephon_dedupe/operator.py"
    text = src.read_text()
    broken = text.replace(
        "        return {**payload, self.field: cleaned}",
        "        import random\n\n        return {**payload, self.field: cleaned, \"noise\": random.random()}",
    )
    assert broken != text
    src.write_text(broken)
    res = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zephon-examples=2", "-rf",
                "-k", "global_random_state"], cwd=op_pkg)
    assert res.returncode != 0
    assert "[rule 3: randomness comes from the data]" in res.stdout, res.stdout[-4000:]
