"""A pipeline's lifecycle says what happened: closed, finished, or too little data for one round."""

from __future__ import annotations

import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource, ZephonError


def _pipeline(n: int = 200, lanes: int = 2, mb: int = 4) -> Pipeline:
    ds = Dataset.from_records("n", [{"i": i} for i in range(n)], shard_size=50)
    return Pipeline(StaticMixtureWorkSource([ds], chunk_size=8)).batch(mb).options(lanes=lanes)


def test_next_after_close_raises_instead_of_returning_a_stale_batch():
    p = _pipeline()
    it = iter(p)
    next(it)
    p.close()
    with pytest.raises(ZephonError, match="closed"):
        next(it)
    with pytest.raises(ZephonError, match="closed"):
        iter(p)


def test_iterating_a_finished_pipeline_again_says_so():
    with _pipeline() as p:
        assert len(list(p)) == 48  # whole rounds only: 200 records over 2 lanes of 8-record chunks
        with pytest.raises(ZephonError, match="delivered all its data"):
            list(p)


def test_data_smaller_than_one_round_is_an_error_not_zero_batches():
    with _pipeline(n=20, lanes=4, mb=8) as p, pytest.raises(ZephonError, match=r"before one whole round.*32 rows"):
        list(p)


def test_flushing_can_not_be_switched_off():
    with pytest.raises(ConfigError, match="replay all of it"):
        _pipeline().options(flush_every_k_chunks=0)


def _clean_html(payload: dict) -> dict:
    return payload


def test_every_step_has_a_unique_name():
    ds = Dataset.from_records("n", [{"i": i} for i in range(20)], shard_size=5)
    p = (
        Pipeline(StaticMixtureWorkSource([ds]))
        .map_transform(_clean_html)
        .map_transform(_clean_html)
        .map_transform(lambda r: r)
        .map_transform(_clean_html, name="decode")
        .stateful_transform("batch", init_state=dict, push=lambda s, r: [r])
        .batch(2)
    )
    names = [step.name for step in p.operators]
    assert names == ["fetch", "_clean_html", "_clean_html_2", "map_transform", "decode", "batch_2", "batch"]
