"""The ``image`` field validator: ``zephon index --validate`` decodes images when zephon-vision is installed.

A garbage JPEG among real ones (made with Pillow, in Parquet and in a WebDataset tar) is an exit
status 1 and a line naming its file, shard, sample, field and reason; a clean dataset is exit 0
with a summary that counts the images decoded. Without the validator the same garbage passed as
"all records decode" and ``decode_image`` failed on it in the run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_vision.decode import ImageDecodeError
from zephon_vision.testing import encode, encoded_records, image_arrays
from zephon_vision.validate import check_image, sniff

from zephon_core.testing.cli import run_cli

N = 8
BAD = 5


def _records() -> list[dict[str, Any]]:
    """``N`` real images (JPEG, PNG, WebP cycled, some grayscale or with alpha) written by Pillow."""
    return encoded_records(N, formats=("JPEG", "PNG", "WEBP"), seed=3)


def _truncated_jpeg() -> bytes:
    """A JPEG cut in half: its signature is right, its scan is not (what an interrupted download leaves)."""
    data = encode(image_arrays(1, min_side=64, max_side=64, seed=9)[0], "JPEG")
    return data[: len(data) // 2]


def _parquet(folder: Path, records: list[dict[str, Any]]) -> Path:
    pytest.importorskip("zephon_parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(records), folder / "images.parquet")
    return folder


def _tar(folder: Path, records: list[dict[str, Any]]) -> Path:
    pytest.importorskip("zephon_webdataset")
    from zephon_webdataset.testing import write_tar

    samples = [{"__key__": f"s{r['n']:03d}", "jpg": r["image"], "cls": r["n"]} for r in records]
    write_tar(folder / "shard-000.tar", samples)
    return folder


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))


# -- zephon index --validate ------------------------------------------------------------------------
def test_a_truncated_jpeg_in_parquet_is_named_and_fails_validation(tmp_path: Path) -> None:
    records = _records()
    records[BAD]["image"] = _truncated_jpeg()
    path = _parquet(tmp_path / "pq", records)
    code, out, err = run_cli("index", str(path), "--validate", "--jobs", "1")
    assert code == 1, out + err
    bad = [line for line in out.splitlines() if "does not decode" in line]
    assert len(bad) == 1, out
    assert re.fullmatch(
        rf"{re.escape(str(path / 'images.parquet'))}: sample {BAD} \(shard 0\), field 'image': "
        r"does not decode as image \(zephon-vision\): JPEG: OSError: image file is truncated.*",
        bad[0],
    ), bad[0]
    summary = out.splitlines()[-1]
    assert summary == (
        f"{path}: validated 1 file(s), {N} record(s): 0 bad record(s), 0 unreadable file(s), "
        f"1 field(s) that do not decode; all {N} records read; {N - 1} of {N} image field(s) decoded by zephon-vision"
    )


def test_random_bytes_under_jpg_in_a_webdataset_tar_fail_validation(tmp_path: Path) -> None:
    records = _records()
    records[BAD]["image"] = np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    path = _tar(tmp_path / "web", records)
    code, out, err = run_cli("index", str(path), "--validate", "--jobs", "1")
    assert code == 1, out + err
    assert (
        f"{path / 'shard-000.tar'}: sample {BAD} (shard 0, key 's{BAD:03d}'), field 'jpg': "
        "does not decode as image (zephon-vision): "
        "3000 bytes starting"
    ) in out
    assert "are in no image format Pillow reads" in out
    assert out.splitlines()[-1].endswith(f"{N - 1} of {N} image field(s) decoded by zephon-vision")


@pytest.mark.parametrize("write", [_parquet, _tar], ids=["parquet", "webdataset"])
def test_clean_images_validate_with_an_honest_summary(tmp_path: Path, write: Any) -> None:
    path = write(tmp_path / "data", _records())
    code, out, err = run_cli("index", str(path), "--validate", "--jobs", "1")
    assert code == 0, out + err
    assert out.splitlines()[-1] == (
        f"{path}: validated 1 file(s), {N} record(s): all {N} records read; {N} image field(s) decoded by zephon-vision"
    )


@pytest.mark.slow  # starts worker processes (seconds on a loaded machine)
def test_validation_in_worker_processes_finds_the_same(tmp_path: Path) -> None:
    """The validators travel to the worker processes as lazy references and report the same lines."""
    pytest.importorskip("zephon_parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records()
    records[BAD]["image"] = _truncated_jpeg()
    (tmp_path / "pq").mkdir()
    for k in range(2):  # two files, so two workers have a shard each
        pq.write_table(pa.Table.from_pylist(records[k * 4 : k * 4 + 4]), tmp_path / "pq" / f"part-{k}.parquet")
    one = run_cli("index", str(tmp_path / "pq"), "--validate", "--jobs", "1")
    two = run_cli("index", str(tmp_path / "pq"), "--validate", "--jobs", "2")
    assert one[0] == two[0] == 1
    assert one[1].splitlines()[1:] == two[1].splitlines()[1:]
    assert "part-1.parquet: sample 1 (shard 1), field 'image'" in two[1]


# -- the check itself -------------------------------------------------------------------------------
def test_check_image_claims_images_by_content_or_by_field_name() -> None:
    jpeg, png = (encode(image_arrays(1, seed=1)[0], fmt) for fmt in ("JPEG", "PNG"))
    assert check_image("image", jpeg) and check_image("image.bytes", png)
    assert check_image("photo", np.frombuffer(png, np.uint8))  # a uint8 vector is bytes to decode_image too
    assert sniff(jpeg) == "JPEG" and sniff(png) == "PNG"
    # not images: text, a numeric array, bytes that merely start with "BM", under a non-image name
    assert not check_image("text", "a caption")
    assert not check_image("pixels", np.zeros((4, 4, 3), np.uint8))
    assert not check_image("blob", b"BMW 320i, 1998, blue")
    with pytest.raises(ImageDecodeError, match=r"5 bytes starting b'hello' are in no image format Pillow reads"):
        check_image("seg.png", b"hello")
    with pytest.raises(ImageDecodeError, match=r"^PNG: "):
        check_image("image", png[:40])
