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
from zephon_core.testing.corpus import documents
from zephon_storage.testing.readers import FileReaderFaults, split, zephon_index


def write_csv(path, records):
    """Written with the standard library's own csv writer (every value becomes text)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)


def as_text(records):
    return [{k: str(v) for k, v in r.items()} for r in records]


class Test{{ cookiecutter.class_name }}(ReaderConformance):
    @pytest.fixture
    def expected_samples(self):
        return [as_text(s) for s in split(documents(limit=360), (120, 120, 120))]

    @pytest.fixture
    def reader_path(self, tmp_path, expected_samples):
        root = tmp_path / "data"
        root.mkdir()
        for k, shard in enumerate(expected_samples):
            write_csv(root / f"part-{k}.csv", shard)
        zephon_index(root)  # the manifest lets a missing or short file be detected
        return str(root)

    @pytest.fixture
    def reader_format(self):
        return "{{ cookiecutter.name }}"


class TestFaults(FileReaderFaults):
    """Bad input (missing, short, corrupt files; checksums; --validate) is an error naming the file."""

    dataset_format = "{{ cookiecutter.name }}"
    suffix = ".csv"
    samples = 300

    def write(self, path, records):
        write_csv(path, records)
{%- endif %}
