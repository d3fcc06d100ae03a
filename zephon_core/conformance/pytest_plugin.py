"""pytest plugin of the conformance suite, registered through the ``pytest11`` entry point.

Adds the ``--zephon-*`` options and the ``zephon_plugins`` fixture; the suite's modules (and the
plugin manager) are imported when a test uses them, so this plugin costs nothing in test runs that
do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


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


def pytest_configure(config: Any) -> None:
    """Declare the ``slow`` mark the suite puts on its three costliest checks (resume from every cut
    point, fresh interpreters, random differential pipelines): ``-m "not slow"`` gives a quick pass
    over every rule, a plain run still runs them all."""
    config.addinivalue_line("markers", "slow: the conformance suite's costliest checks (deselect with -m 'not slow')")


@pytest.fixture
def zephon_plugins() -> ZephonPluginManager:
    """The plugin manager the conformance suite builds pipelines and readers with.

    A fresh manager per test (:func:`~zephon_core.plugins.default_plugin_manager`), so a test
    cannot see what another test registered. Override it (in a test class or a ``conftest.py``)
    to test a plugin that is not installed, e.g.
    ``ZephonPluginManager(load_entrypoints=False, plugins=[my_plugin])``.
    """
    from zephon_core.plugins import default_plugin_manager

    return default_plugin_manager()


def get_zephon_plugins(request: pytest.FixtureRequest) -> ZephonPluginManager:
    """The current test's ``zephon_plugins`` (including any override), for suite code that is not
    itself a fixture and cannot simply list ``zephon_plugins`` among its arguments."""
    manager: ZephonPluginManager = request.getfixturevalue("zephon_plugins")
    return manager
