"""The example {{ cookiecutter.kind }} in a real pipeline."""

from __future__ import annotations

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

{% if cookiecutter.kind == 'operator' -%}
def test_repeats_are_dropped_within_a_window():
    docs = [{"text": t} for t in ["a  b", "A B", "c", "a b", "d"]] * 4
    ws = StaticMixtureWorkSource([Dataset.from_records("d", docs, shard_size=5)], chunk_size=5, shuffle=False)
    with Pipeline(ws).{{ cookiecutter.name }}(parallelism=2).batch(1).options(flush_every_k_chunks=1) as p:
        rows = [b.data["text"][0] for b in p]
    assert rows == ["a b", "c", "d"] * 4  # one window per chunk: memory resets at each flush
{%- else -%}
import csv

from zephon_storage.testing.readers import run_cli


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["n", "text"])
        w.writerows(rows)


def test_reads_through_a_pipeline(tmp_path):
    write(tmp_path / "a.csv", [[i, f"row {i}"] for i in range(10)])
    ds = Dataset.from_path("a", str(tmp_path))
    assert ds.format == "{{ cookiecutter.name }}"
    ws = StaticMixtureWorkSource([ds], chunk_size=5, shuffle=False)
    with Pipeline(ws).batch(5) as p:
        texts = [t for b in p for t in b.data["text"].tolist()]
    assert texts == [f"row {i}" for i in range(10)]


def test_a_bad_row_is_found_by_validate_and_skipped_on_request(tmp_path):
    write(tmp_path / "a.csv", [[i, f"row {i}"] if i != 3 else [i] for i in range(10)])
    code, out, _ = run_cli("index", str(tmp_path), "--validate")
    assert code == 1 and "a.csv: row 3 has 1 fields, header has 2" in out
    ds = Dataset.from_path("a", str(tmp_path), on_error="skip", max_bad_fraction=0.5)
    ws = StaticMixtureWorkSource([ds], chunk_size=5, shuffle=False)
    with Pipeline(ws).batch(3) as p:
        texts = [t for b in p for t in b.data["text"].tolist()]
    assert texts == [f"row {i}" for i in range(10) if i != 3]
{%- endif %}
