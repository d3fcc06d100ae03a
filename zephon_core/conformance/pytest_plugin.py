"""pytest plugin of the conformance suite, registered through the ``pytest11`` entry point.

Only adds ``--zephon-*`` options; the suite's modules are imported when a test uses them, so this
plugin costs nothing in test runs that do not.
"""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("zephon", "Zephon determinism conformance suite")
    group.addoption(
        "--zephon-operator",
        dest="zephon_operator",
        default=None,
        help="registered operator name to test in no-code mode",
    )
    group.addoption(
        "--zephon-config",
        dest="zephon_config",
        default="{}",
        help='operator keyword arguments as JSON; {"$callable": "module:attr"} imports a function',
    )
    group.addoption(
        "--zephon-upstream",
        dest="zephon_upstream",
        default="[]",
        help='operators to place before the one under test, as JSON [["name", {kwargs}], ...]',
    )
    group.addoption(
        "--zephon-reader",
        dest="zephon_reader",
        default=None,
        help="registered reader (format) name to test in no-code mode",
    )
    group.addoption("--zephon-path", dest="zephon_path", default=None, help="dataset path for --zephon-reader")
    group.addoption(
        "--zephon-examples",
        dest="zephon_examples",
        default=6,
        type=int,
        help="Hypothesis examples for the differential test (default 6)",
    )
