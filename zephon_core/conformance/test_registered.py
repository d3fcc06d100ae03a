"""No-code mode: test any installed operator or reader by its registered name.

pytest --pyargs zephon_core.conformance --zephon-operator=shuffle --zephon-config='{"buffer_size": 16}'
pytest --pyargs zephon_core.conformance --zephon-reader=parquet --zephon-path=/data/ds
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from zephon_core.conformance.operators import OperatorConformance, OperatorFactory
from zephon_core.errors import PluginError
from zephon_core.ops.contract import Operator
from zephon_core.plugins import default_plugin_manager, load_object

if TYPE_CHECKING:
    from zephon_core.conformance import ReaderConformance
else:
    try:
        from zephon_core.conformance import ReaderConformance
    except PluginError as exc:  # the reader suite is zephon-storage's: operators are still tested here
        _NO_READER_SUITE = str(exc)

        class ReaderConformance:
            def test_reader_suite_is_installed(self, reader_path: str) -> None:
                pytest.fail(f"--zephon-reader: {_NO_READER_SUITE}")


def _resolve(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$callable"}:
            return load_object(value["$callable"])
        return {k: _resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    return value


def make_registered(name: str, config_json: str, parallelism: int = 1, runner: str | None = None) -> Operator:
    """Build a registered operator from its name and JSON keyword arguments (picklable via partial)."""
    factory: Callable[..., Operator] = default_plugin_manager().registry.get("operator", name).load()
    kwargs = _resolve(json.loads(config_json))
    args = kwargs.pop("$args", [])
    return factory(*args, parallelism=parallelism, runner=runner, **kwargs)


class TestRegisteredOperator(OperatorConformance):
    @pytest.fixture
    def operator_factory(self, request: pytest.FixtureRequest) -> OperatorFactory:
        name = request.config.getoption("zephon_operator")
        if not name:
            pytest.skip("pass --zephon-operator=NAME to test a registered operator")
        return functools.partial(make_registered, name, request.config.getoption("zephon_config"))

    @pytest.fixture
    def upstream(self, request: pytest.FixtureRequest) -> list[Callable[[], Operator]]:
        spec = json.loads(request.config.getoption("zephon_upstream"))
        return [functools.partial(make_registered, n, json.dumps(kw)) for n, kw in spec]


class TestRegisteredReader(ReaderConformance):
    @pytest.fixture
    def reader_path(self, request: pytest.FixtureRequest) -> str:
        path: str = request.config.getoption("zephon_path")
        if not request.config.getoption("zephon_reader") or not path:
            pytest.skip("pass --zephon-reader=NAME --zephon-path=PATH to test a registered reader")
        return path

    @pytest.fixture
    def reader_format(self, request: pytest.FixtureRequest) -> str | None:
        fmt: str | None = request.config.getoption("zephon_reader")
        return fmt
