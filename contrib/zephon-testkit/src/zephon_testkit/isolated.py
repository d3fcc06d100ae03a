"""Install one package of the repository into a fresh virtual environment with only its declared dependencies.

One shared development environment hides a missing dependency (another package happens to bring
it), so each plugin is also tested alone: ``python -m venv``, ``pip install <repo>[testing]`` (the
kernel, its own dependencies and its light test kit, so scripts run there can use
:mod:`zephon_core.testing`), ``pip install plugins/<name>``, then a script run by that environment's
Python, outside the repository and with ``PYTHONPATH`` cleared so nothing leaks in. This module runs
in the test's own environment; zephon-testkit is not installed into the new one.

The venv is made without pip and this interpreter's pip installs into it (``pip --python``), with
``--no-compile``: seeding pip into every venv and byte-compiling pyarrow or numpy on install took
three quarters of each test's 30 s; modules are compiled when first imported instead.

Only meaningful in a checkout of the repository (the kernel installed in editable mode); elsewhere
:func:`install_alone` skips the calling test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import zephon_core

WORKSPACES = ("plugins", "contrib")
"""Folders of the repository that hold separately installable packages."""


def repository_root() -> Path | None:
    """The repository this kernel is installed from (editable install), or None for a regular install.

    Found from the kernel package, not from this module: zephon-testkit lives in ``contrib/`` of the
    same checkout, but what is installed alone is always built from the kernel's checkout.
    """
    root = Path(zephon_core.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and all((root / w).is_dir() for w in WORKSPACES):
        return root
    return None


def package_dir(package: str, root: Path) -> Path:
    """The source folder of ``package`` (``"zephon-jsonl"``) under ``plugins/`` or ``contrib/``."""
    for workspace in WORKSPACES:
        folder = root / workspace / package
        if (folder / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError(f"no package {package!r} under {', '.join(WORKSPACES)} of {root}")


def run(cmd: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run ``cmd``; its stdout, or an AssertionError with the end of its output when it fails."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def install_alone(package: str, where: Path, timeout: float = 400, constraints: Path | None = None) -> Path:
    """A fresh venv under ``where`` with the kernel (``[testing]``) and ``package``; returns its python.

    Args:
        package: a distribution of the repository, e.g. ``"zephon-jsonl"``.
        where: a temporary folder (the venv goes to ``where / "venv"``).
        timeout: seconds allowed per pip call.
        constraints: a pip constraints file (e.g. to keep torch on its CPU build).
    """
    root = repository_root()
    if root is None:
        import pytest

        pytest.skip("installs packages from the zephon repository: runs inside a checkout only")
    python = new_venv(where / "venv", timeout)
    folders = [package_dir(p, root) for p in [*first_party_requirements(package, root), package]]
    kernel, *packages = build_wheels([root, *folders], where / "wheels", timeout)
    pip = pip_install(python)
    if constraints is not None:
        pip += ["-c", str(constraints)]
    run([*pip, f"{kernel}[testing]", *map(str, packages)], timeout)
    return python


def declared_dependencies(folder: Path) -> list[str]:
    """The distribution names in ``[project] dependencies`` of the package at ``folder``."""
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: read the one list by hand
        text = (folder / "pyproject.toml").read_text()
        match = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
        specs = re.findall(r"\"([^\"]+)\"", match.group(1)) if match else []
    else:
        specs = tomllib.loads((folder / "pyproject.toml").read_text()).get("project", {}).get("dependencies", [])
    return [re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower() for spec in specs]


def first_party_requirements(package: str, root: Path) -> list[str]:
    """The repository's own distributions ``package`` needs (besides the kernel), dependencies first.

    They are not on a package index while the repository is the only source (``zephon-storage`` for
    a reader plugin), so they are built from the checkout and installed with the package; anything
    else is left to pip, so a dependency that is not declared is still missing.
    """
    out: list[str] = []

    def visit(name: str) -> None:
        for dep in declared_dependencies(package_dir(name, root)):
            if dep != "zephon-core" and dep not in out and any((root / w / dep).is_dir() for w in WORKSPACES):
                visit(dep)
                out.append(dep)

    visit(package)
    return out


def new_venv(venv: Path, timeout: float = 120) -> Path:
    """A fresh virtual environment without pip (see :func:`pip_install`); returns its python."""
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout)
    return venv / "bin" / "python"


def pip_install(python: Path) -> list[str]:
    """The command that installs into ``python``'s environment: this interpreter's pip, ``--python``."""
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    return [*pip, "install", "-q", "--no-compile"]


def build_wheels(sources: Sequence[Path], out: Path, timeout: float = 400) -> list[Path]:
    """Wheels of these package folders, built by this interpreter's setuptools without build isolation.

    Each source is copied first (without caches or build output), so tests running side by side never
    build in the same folder, and nothing is written into the checkout. Building here instead of in
    a fresh isolated build environment per package is what makes an install-alone test take seconds
    of pip, not a minute: the installed result is the same wheel.
    """
    import shutil
    import tempfile

    out.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    skip = shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info", ".venv*", "tests", ".git", "site")
    for src in sources:
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            copy = Path(tmp) / src.name
            if (src / "zephon_core").is_dir():  # the kernel: only what its distribution holds
                copy.mkdir()
                for name in ("pyproject.toml", "README.md", "LICENSE"):
                    if (src / name).exists():
                        shutil.copy2(src / name, copy / name)
                shutil.copytree(src / "zephon_core", copy / "zephon_core", ignore=skip)
            else:
                shutil.copytree(src, copy, ignore=skip)
            cached = _wheel_cache(copy)
            hit = sorted(cached.glob("*.whl")) if cached.is_dir() else []
            if hit:
                wheels.append(Path(shutil.copy2(hit[0], out / hit[0].name)))
                continue
            before = set(out.glob("*.whl"))
            cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
            run([*cmd, str(copy)], timeout)
            (new,) = set(out.glob("*.whl")) - before
            wheels.append(new)
            cached.parent.mkdir(parents=True, exist_ok=True)
            staged = Path(tempfile.mkdtemp(dir=cached.parent))
            shutil.copy2(new, staged / new.name)
            try:
                os.replace(staged, cached)  # whole or not at all: a test beside this one sees no half wheel
            except OSError:  # another test stored the same wheel first
                shutil.rmtree(staged, ignore_errors=True)
    return wheels


def _wheel_cache(tree: Path) -> Path:
    """Where the wheel of this exact source tree is kept for the session's other install-alone tests.

    Every install-alone test builds the kernel's wheel (and often the storage toolkit's); the key is
    a hash of every file's path and bytes, so a changed source never meets an old wheel.
    """
    import hashlib
    import tempfile

    digest = hashlib.sha256()
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes() + b"\0")
    return Path(tempfile.gettempdir()) / "zephon-wheel-cache" / "built" / f"{tree.name}-{digest.hexdigest()[:20]}"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``PYTHONPATH`` (plus ``extra``), for scripts run in the venv."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def run_script(
    python: Path,
    script: str,
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> str:
    """Run ``script`` (with ``args``) by ``python`` in ``cwd``; returns its stdout.

    ``cwd`` must not be the repository, so the repository's sources cannot shadow what is installed;
    ``env`` defaults to :func:`clean_env`.
    """
    path = cwd / "check_alone.py"
    path.write_text(script)
    return run([str(python), str(path), *args], timeout, env=env if env is not None else clean_env(), cwd=cwd)


def installed(python: Path) -> set[str]:
    """Distribution names installed in that environment (lower case)."""
    out = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "list",
            "--format=freeze",
            "--disable-pip-version-check",
        ],
        60,
    )
    return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}


def check_alone(
    package: str,
    where: Path,
    script: str,
    *args: str,
    present: Iterable[str] = (),
    absent: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    expect: str = "ALONE OK",
    listed_as: str | None = None,
    timeout: float = 400,
    constraints: Path | None = None,
) -> Path:
    """Install ``package`` alone, check what came with it, run ``script`` there; returns the venv's python.

    Args:
        package: the distribution under test (``"zephon-jsonl"``).
        where: a temporary folder for the venv and the script.
        script: Python source run by the venv's interpreter (with ``args``); it must print ``expect``.
        present: distributions that must be installed besides ``package`` and ``zephon-core``.
        absent: distributions that must not be (heavy libraries the package promises not to need).
        env: the script's environment (default :func:`clean_env`).
        expect: what the script prints when all its checks passed.
        listed_as: a plugin kind (``"reader"``): ``zephon plugins --kind <kind>`` must list ``package``,
            so its entry point is installed and loads.
        timeout: seconds allowed per pip call and for the script.
        constraints: a pip constraints file applied to every install (the repository's keeps torch
            on its CPU build).

    Raises:
        AssertionError: a distribution is missing or present against the promise, or the script
            failed or did not print ``expect``.
    """
    python = install_alone(package, where, timeout=timeout, constraints=constraints)
    dists = installed(python)
    missing = {package, "zephon-core", *present} - dists
    unwanted = dists & set(absent)
    if missing or unwanted:
        raise AssertionError(
            f"{package} alone: missing {sorted(missing)}, unwanted {sorted(unwanted)}; has {sorted(dists)}"
        )
    out = run_script(python, script, where, *args, env=env, timeout=timeout)
    if expect not in out:
        raise AssertionError(f"{package} alone: the script did not print {expect!r}:\n{out[-3000:]}")
    if listed_as is not None:
        listed = run([str(python.parent / "zephon"), "plugins", "--kind", listed_as], 120, env=env or clean_env())
        if package not in listed:
            raise AssertionError(f"{package} alone: `zephon plugins --kind {listed_as}` does not list it:\n{listed}")
    return python


def check_alone_with_torch(
    package: str,
    where: Path,
    script: str,
    *,
    present: Iterable[str] = (),
    absent: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> None:
    """:func:`check_alone` for a package that brings torch: every install under the repository's
    constraints (so pip keeps the CPU build of torch instead of fetching a CUDA one), and the venv,
    1-2 GB of it torch, removed afterwards whatever the outcome."""
    root = repository_root()
    constraints = root / ".ci" / "constraints.txt" if root is not None else None
    try:
        check_alone(
            package, where, script, present=present, absent=absent, env=env, timeout=timeout, constraints=constraints
        )
    finally:
        shutil.rmtree(where / "venv", ignore_errors=True)
