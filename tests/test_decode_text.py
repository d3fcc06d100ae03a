"""``decode_text``: bytes to str with an encoding, an error policy, newline normalisation and optional
lower-casing; a record that does not decode is named (or skipped, deterministically)."""

from __future__ import annotations

import functools

import pytest

from zephon_core import ConfigError, Dataset, OperatorError, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.conformance.samples import text_records
from zephon_core.defaults.operators.text import DecodeText


def _run(records: list[dict], **kw) -> list[str]:
    ds = Dataset.from_records("docs", records, shard_size=4)
    p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=4, shuffle=False)).decode_text(**kw).batch(1)
    with p:
        return [str(b.data[kw.get("output_field") or "text"][0]) for b in p]


def test_encodings_newlines_lowercase_and_str_passthrough():
    records = [{"text": "Crème\r\nBrûlée".encode()}, {"text": "Olé\rOK".encode("latin-1")}, {"text": "Already\r\nstr"}]
    assert _run(records[:1]) == ["Crème\nBrûlée"]
    assert _run(records[1:2], encoding="latin-1", lowercase=True) == ["olé\nok"]
    assert _run(records[2:], normalize_newlines=False) == ["Already\r\nstr"]
    assert _run(records[:1], output_field="clean") == ["Crème\nBrûlée"]


def test_a_record_that_does_not_decode_is_named_or_skipped_or_repaired():
    records = [{"text": f"doc {i}".encode()} for i in range(8)]
    records[5] = {"text": b"bad \xff\xfe bytes"}
    with pytest.raises(OperatorError, match=r"decode_text.*docs\[shard 1 .*index 1\].*not valid utf-8 at byte 4"):
        _run(records)
    assert _run(records, errors="skip") == [f"doc {i}" for i in range(8) if i != 5]
    assert _run(records, errors="replace")[5] == "bad \ufffd\ufffd bytes"
    assert _run(records, errors="ignore")[5] == "bad  bytes"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"encoding": "klingon"}, "unknown encoding 'klingon'"),
        ({"errors": "drop"}, r"errors must be one of \['strict', 'replace', 'ignore', 'skip'\]"),
        ({"lowercase": 1}, "lowercase must be True or False"),
    ],
)
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DecodeText(**kwargs)


def _encoded_records() -> list[dict]:
    out = []
    for r in text_records(240):
        raw = r["text"].replace(". ", ".\r\n").encode()
        out.append({"text": raw + b"\xff" if r["n"] % 7 == 0 else raw, "n": r["n"]})
    return out


@pytest.mark.slow
class TestDecodeTextConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(DecodeText, errors="skip", lowercase=True)

    @pytest.fixture
    def sample_records(self):
        return _encoded_records()
