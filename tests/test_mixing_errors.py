"""Mixing datasets: what a user is told when the fields differ, the weights do not sum to 1, or a dataset is empty."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import ConfigError, OperatorError
from zephon_core.runtime.batch import default_collate

# -- rows with different fields --------------------------------------------------------------------


def test_collating_datasets_with_different_fields_names_the_fields_the_sample_and_the_fixes():
    a = Dataset.from_records("a", [{"text": f"a{i}", "id": i} for i in range(64)], shard_size=16)
    b = Dataset.from_records("b", [{"text": f"b{i}", "url": f"u{i}"} for i in range(64)], shard_size=16)
    source = StaticMixtureWorkSource([a, b], MixtureSpec({"a": 0.5, "b": 0.5}), chunk_size=4, seed=3)
    with pytest.raises(OperatorError) as err, Pipeline(source).batch(8).options(lanes=1) as p:
        list(p)
    msg = str(err.value)
    first = re.search(r"row 0 has \[([^]]*)\]", msg)
    assert first is not None, msg
    other = "b" if "'id'" in first.group(1) else "a"  # the failing row comes from the other dataset
    assert re.search(rf"samples {other}\[shard \d+ \(memory-\d+\), index \d+\]: batch: row \d+ has no field", msg), msg
    assert "['id', 'text']" in msg and "['text', 'url']" in msg, msg
    for fix in ("columns=[...]", "fields=[...]", "map_transform", "batch(collate=...)"):
        assert fix in msg, (fix, msg)
    assert "\n" not in msg


def test_default_collate_says_which_fields_differ_and_which_row():
    with pytest.raises(ConfigError) as err:
        default_collate([{"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": 3, "c": 4}])
    msg = str(err.value)
    assert msg.startswith("batch: row 2 has no field 'b':"), msg
    assert "row 0 has ['a', 'b'] and row 2 has ['a', 'c'] (row 2 lacks ['b'], and has ['c'] that row 0 has not)" in msg
    assert err.value.index == 2  # so the batch stage names that row's sample


def test_default_collate_names_the_mixed_types_and_the_odd_row():
    with pytest.raises(ConfigError) as err:
        default_collate([{"x": 1}, {"x": 2}, {"x": None}])
    msg = str(err.value)
    assert (
        "field 'x' holds values of mixed or unsupported types (NoneType, int; row 0 holds int, row 2 NoneType)" in msg
    )
    assert "map_transform" in msg and "batch(collate=...)" in msg
    assert err.value.index == 2


def test_default_collate_output_on_valid_rows_is_unchanged():
    out = default_collate([{"i": 1, "s": "ab", "v": [1, 2]}, {"i": 2, "s": "c", "v": np.array([3, 4])}])
    assert sorted(out) == ["i", "s", "v"]
    assert out["i"].tolist() == [1, 2] and out["s"].tolist() == ["ab", "c"] and out["s"].dtype == np.dtype("<U2")
    assert out["v"].tolist() == [[1, 2], [3, 4]]


# -- mixture weights -------------------------------------------------------------------------------


def test_weights_that_do_not_sum_to_one_warn_with_the_normalised_shares():
    with pytest.warns(UserWarning) as caught:
        spec = MixtureSpec({"web": 0.7, "code": 0.2})
    (w,) = caught
    msg = str(w.message)
    assert "the weights {'web': 0.7, 'code': 0.2} sum to 0.9, not 1" in msg, msg
    assert "normalised to {'web': 0.777778, 'code': 0.222222}" in msg and "ratios=True" in msg, msg
    assert w.filename == __file__  # points at the user's line, not at the dataclass machinery
    assert spec.weights == {"web": 0.7, "code": 0.2}  # kept as given: fingerprints do not change


def test_weights_summing_to_one_ratios_on_purpose_and_the_default_mixture_do_not_warn():
    a = Dataset.from_records("a", [{"i": i} for i in range(30)], shard_size=10)
    b = Dataset.from_records("b", [{"i": i} for i in range(10)], shard_size=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MixtureSpec({f"d{i}": 0.1 for i in range(10)})  # sums to 0.9999999999999999
        MixtureSpec({"web": 0.7, "code": 0.3})
        spec = MixtureSpec({"web": 3, "code": 1}, ratios=True)
        StaticMixtureWorkSource([a, b])  # weights proportional to the sizes
    assert spec.normalized() == {"web": 0.75, "code": 0.25} and spec.weights == {"web": 3, "code": 1}
    assert spec == MixtureSpec({"web": 3, "code": 1}, ratios=True)
    with pytest.raises(ConfigError, match="MixtureSpec: ratios must be True or False, got 'yes'"):
        MixtureSpec({"web": 1.0}, ratios="yes")


# -- an empty record list --------------------------------------------------------------------------


@pytest.mark.parametrize("records", [[], (), iter([])], ids=["list", "tuple", "iterator"])
def test_from_records_with_no_records_says_so(records):
    with pytest.raises(ConfigError, match=r"^dataset 'x': Dataset.from_records got an empty list of records"):
        Dataset.from_records("x", records)


def test_from_records_accepts_any_iterable_of_records():
    ds = Dataset.from_records("g", ({"i": i} for i in range(5)), shard_size=2)
    assert ds.num_samples == 5 and ds[4] == {"i": 4}
