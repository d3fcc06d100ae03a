"""Zephon's determinism conformance suite, run against this package's {{ cookiecutter.kind }}."""

from __future__ import annotations

import pytest

{% if cookiecutter.kind == 'operator' -%}
from zephon_core.conformance import OperatorConformance

from {{ cookiecutter.package_name }}.operator import {{ cookiecutter.class_name }}


class Test{{ cookiecutter.class_name }}(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return {{ cookiecutter.class_name }}
{%- else -%}
import csv

from zephon_core.conformance import ReaderConformance
from zephon_core.conformance.samples import text_records

from {{ cookiecutter.package_name }}.index import build_index


class Test{{ cookiecutter.class_name }}(ReaderConformance):
    @pytest.fixture
    def reader_path(self, tmp_path):
        root = tmp_path / "data"
        root.mkdir()
        records = text_records(120)
        for shard in range(3):  # written with the standard library's own csv writer
            with open(root / f"part-{shard}.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["n", "text"])
                w.writeheader()
                w.writerows({"n": r["n"], "text": r["text"]} for r in records[shard::3])
        build_index(str(root))
        return str(root)

    @pytest.fixture
    def reader_format(self):
        return "{{ cookiecutter.name }}"
{%- endif %}
