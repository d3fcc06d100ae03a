"""The conformance suite passes every built-in operator and rejects every broken one by rule."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.broken_operators import BROKEN

ROOT = Path(__file__).resolve().parents[1]
S = "zephon_core.conformance.samples"


def _pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", "--zephon-examples=2", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )


BUILTINS = {
    "map_transform": {"$args": [{"$callable": f"{S}:upper_or_drop"}]},
    "flat_map": {"$args": [{"$callable": f"{S}:split_sentences"}]},
    "stateful_transform": {
        "$args": ["words"],
        "init_state": {"$callable": f"{S}:words_init"},
        "push": {"$callable": f"{S}:words_push"},
        "flush": {"$callable": f"{S}:words_flush"},
        "transform": {"$callable": f"{S}:words_transform"},
    },
    "shuffle": {"buffer_size": 16, "seed": 3},
}
# fetch and batch are the kernel's own stages, not operators: the kernel's determinism matrix and
# replay tests cover them.


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    # flat_map is map_transform's worker with a list per slot, and the shuffle's accumulator is checked
    # in-process with its other algorithms (tests/test_shuffle_algorithms.py): run those with -m exhaustive
    [
        pytest.param(n, marks=pytest.mark.exhaustive) if n in ("flat_map", "shuffle") else n
        for n in sorted(BUILTINS)
    ],
)
def test_no_code_mode_passes_builtin(name):
    out = _pytest(
        "--pyargs",
        "zephon_core.conformance",
        f"--zephon-operator={name}",
        f"--zephon-config={json.dumps(BUILTINS[name])}",
        "-k",
        "Operator",
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", out.stdout)


@pytest.mark.slow
def test_no_code_mode_without_options_skips_cleanly():
    out = _pytest("--pyargs", "zephon_core.conformance", "-k", "listing or parallelism")
    assert out.returncode == 0, out.stdout[-3000:]
    assert "pass --zephon-operator=NAME" in out.stdout and "pass --zephon-reader=NAME" in out.stdout


CHECKS_OF_RULE = {
    1: ("test_parallelism_does_not_change_output", "test_runner_does_not_change_output", "test_worker_pickles"),
    2: ("test_world_size_does_not_change_global_batches", "test_lane_purity", "test_state_and_config_are_json"),
    3: ("test_no_dependence_on_global_random_state", "test_fresh_interpreters_agree"),
    4: ("test_flush_resets_lane",),
    5: ("test_lineage_is_conserved", "test_lineage_is_exact"),
    6: ("test_grouping_does_not_change_output",),
    7: ("test_resume_from_every_cut_point", "test_resume_on_another_world_size", "test_differential_random_pipelines"),
}
"""The suite's operator checks by the rule their failures name. Each broken operator runs only the
checks of the rule it breaks: whether a check of another rule also trips over it proves nothing
about that rule, and running all of them on all ten operators took over three minutes."""

SHOWN_ON = {
    "test_resume_from_every_cut_point": ("KeepsStateAcrossFlush", "MixesLanes"),
    "test_fresh_interpreters_agree": ("UnseededRandom", "DependsOnWorkerIdentity"),
}
"""Broken operators the suite's two end-to-end replays must also reject although they target
another rule (state carried across a flush, lanes mixed; hash seeds, worker identity): the replays
catch any such leak, not only the ones their own rule names."""


def _checks_for(name: str, rule_no: int) -> set[str]:
    """The checks a broken operator runs: its rule's, plus the replays shown on it."""
    return set(CHECKS_OF_RULE[rule_no]) | {check for check, shown_on in SHOWN_ON.items() if name in shown_on}


def test_every_check_of_the_suite_has_a_rule() -> None:
    """A check added to the suite is tagged with its rule here, so the broken operators exercise it."""
    from zephon_core.conformance import OperatorConformance

    checks = {n for n in dir(OperatorConformance) if n.startswith("test_")}
    mapped = [c for cs in CHECKS_OF_RULE.values() for c in cs]
    assert len(mapped) == len(set(mapped)), mapped
    assert set(mapped) == checks, (sorted(checks - set(mapped)), sorted(set(mapped) - checks))
    assert {rule_no for rule_no in BROKEN.values()} | {7} == set(CHECKS_OF_RULE), "a rule has no broken operator"


@pytest.mark.slow
def test_suite_rejects_every_broken_operator_naming_the_rule(tmp_path: Path) -> None:
    assert len(BROKEN) >= 8
    checks = sorted(c for cs in CHECKS_OF_RULE.values() for c in cs)
    lines = [
        "import functools, pytest",
        "from zephon_core.conformance import OperatorConformance",
        "from zephon_core.conformance.samples import text_records",
        "import tests.broken_operators as b",
    ]
    for cls, rule_no in BROKEN.items():
        lines += [
            f"class Test{cls.__name__}(OperatorConformance):",
            "    @pytest.fixture",
            "    def operator_factory(self):",
            f"        return b.{cls.__name__}",
            "    @pytest.fixture",
            "    def sample_records(self):",
            "        return text_records(240)",
        ]
        mine = _checks_for(cls.__name__, rule_no)
        for check in checks:
            if check not in mine:
                lines += ["    @pytest.mark.skip(reason='checks another rule')", f"    def {check}(self): ..."]
    test_file = tmp_path / "test_broken.py"
    test_file.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.xml"
    out = _pytest(str(test_file), "--rootdir", str(tmp_path), f"--junitxml={report}")
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    failures: dict[str, list[str]] = {}
    ran: dict[str, set[str]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        if case.find("skipped") is None:
            ran.setdefault(cls, set()).add(case.get("name", "").split("[", 1)[0])
        for failure in case.findall("failure"):
            failures.setdefault(cls, []).append(f"{case.get('name')}: {failure.get('message', '')[:300]}")
    for cls, rule_no in BROKEN.items():
        assert ran.get(f"Test{cls.__name__}") == _checks_for(cls.__name__, rule_no), (cls.__name__, ran)
        mine = failures.get(f"Test{cls.__name__}", [])
        assert mine, f"{cls.__name__} passed the checks of rule {rule_no}:\n{out.stdout[-3000:]}"
        assert any(f"[rule {rule_no}:" in m for m in mine), (
            f"{cls.__name__} was rejected, but not for rule {rule_no}:\n" + "\n".join(mine)
        )
    for check, shown_on in SHOWN_ON.items():
        for name in shown_on:
            assert any(m.startswith(f"{check}:") for m in failures.get(f"Test{name}", [])), (check, name)


@pytest.mark.slow
def test_lineage_rule_rejects_crediting_only_recent_inputs(tmp_path):
    """Rule 5 per output: an operator that credits a row only with the records pushed since the
    previous row (the old ``stateful_transform`` rule) is rejected; the built-in operators pass."""
    subjects = {
        "CreditsOnlyRecentInputs": "b.CreditsOnlyRecentInputs",
        "MapTransform": "functools.partial(MapTransform, s.upper_or_drop)",
        "FlatMap": "functools.partial(FlatMap, s.split_sentences)",
        "Shuffle": "functools.partial(Shuffle, 16, seed=3)",
        "StatefulTransform": (
            "functools.partial(StatefulTransform, 'words', init_state=s.words_init, push=s.words_push, "
            "flush=s.words_flush, transform=s.words_transform)"
        ),
    }
    lines = [
        "import functools, pytest",
        "from zephon_core.conformance import OperatorConformance",
        "from zephon_core.conformance import samples as s",
        "from zephon_core.defaults.operators.mapping import FlatMap, MapTransform",
        "from zephon_core.defaults.operators.shuffle import Shuffle",
        "from zephon_core.defaults.operators.stateful import StatefulTransform",
        "import tests.broken_operators as b",
    ]
    for name, factory in subjects.items():
        lines += [
            f"class Test{name}(OperatorConformance):",
            "    @pytest.fixture",
            "    def operator_factory(self):",
            f"        return {factory}",
        ]
    test_file = tmp_path / "test_subjects.py"  # not "lineage": -k matches module names too
    test_file.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.xml"
    out = _pytest(str(test_file), "--rootdir", str(tmp_path), f"--junitxml={report}", "-k", "lineage")
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    results: dict[tuple[str, str], str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        results[(cls, case.get("name", ""))] = "" if failure is None else failure.get("message", "")
    assert set(results) == {(f"Test{n}", t) for n in subjects for t in ("test_lineage_is_conserved", "test_lineage_is_exact")}
    broken = results.pop(("TestCreditsOnlyRecentInputs", "test_lineage_is_exact"))
    assert broken.startswith("AssertionError: [rule 5:") and "does not name it" in broken, broken
    assert not any(results.values()), {k: v[:300] for k, v in results.items() if v}
