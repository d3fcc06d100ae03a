"""``zephon index --validate`` runs the installed field validators (``zephon_register_validators``).

A reader only checks that a record parses; a payload inside a field that no installed decoder
checks must not be reported as valid. The validator here is a real one, registered through the
hook like a decoder plugin's: a bytes field that starts with a zlib header must decompress. The
data is Parquet, written by pyarrow and read by zephon-parquet (the plugins are given to the
manager explicitly, so whatever else is installed does not change the summary).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pytest
from zephon_storage.validation import leaves

from zephon_core import hookimpl
from zephon_core.cli import main
from zephon_core.errors import PluginError
from zephon_core.plugins import ZephonPluginManager

N = 6
BAD = 4


def check_zlib(field: str, value: Any) -> bool:
    """A zlib stream (by its header bytes) must decompress; anything else is not this validator's."""
    if not isinstance(value, bytes) or len(value) < 2 or value[0] != 0x78 or (value[0] << 8 | value[1]) % 31:
        return False
    try:
        zlib.decompress(value)
    except zlib.error as exc:
        raise ValueError(f"zlib: {exc}") from None
    return True


class ZlibPlugin:
    """Registers :func:`check_zlib` as the ``zlib`` field validator."""

    @hookimpl
    def zephon_register_validators(self, register: Any) -> None:
        register(name="zlib", factory=check_zlib, description="zlib streams must decompress")


def _manager(*extra: object) -> ZephonPluginManager:
    parquet = pytest.importorskip("zephon_parquet.plugin")
    from zephon_storage import plugin as storage_commands  # `zephon index` is this package's command

    return ZephonPluginManager(load_entrypoints=False, plugins=[parquet, storage_commands, *extra])


def _write(folder: Path, blobs: list[bytes]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    rows = [{"id": i, "caption": f"row {i}", "blob": b} for i, b in enumerate(blobs)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "data.parquet")
    return folder


def _blobs() -> list[bytes]:
    return [zlib.compress(f"payload {i} ".encode() * 50) for i in range(N)]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))


def _validate(path: Path, pm: ZephonPluginManager, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["index", str(path), "--validate", "--jobs", "1"], plugins=pm)
    return code, capsys.readouterr().out.splitlines()


def test_a_payload_that_does_not_decode_is_named_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blobs = _blobs()
    blobs[BAD] = blobs[BAD][: len(blobs[BAD]) // 2]  # a cut-short stream: the record still parses
    path = _write(tmp_path / "ds", blobs)
    pm = _manager(ZlibPlugin())
    package = pm.registry.get("validator", "zlib").package
    code, lines = _validate(path, pm, capsys)
    assert code == 1, lines
    assert lines[1] == (
        f"{path / 'data.parquet'}: sample {BAD} (shard 0), field 'blob': does not decode as zlib ({package}): "
        "zlib: Error -5 while decompressing data: incomplete or truncated stream"
    )
    assert lines[-1] == (
        f"{path}: validated 1 file(s), {N} record(s): 0 bad record(s), 0 unreadable file(s), "
        f"1 field(s) that do not decode; all {N} records read; {N - 1} of {N} zlib field(s) decoded by {package}"
    )


def test_clean_payloads_say_what_decoded_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "ds", _blobs())
    pm = _manager(ZlibPlugin())
    package = pm.registry.get("validator", "zlib").package
    code, lines = _validate(path, pm, capsys)
    assert code == 0, lines
    assert lines[-1] == (
        f"{path}: validated 1 file(s), {N} record(s): all {N} records read; {N} zlib field(s) decoded by {package}"
    )


def test_without_a_validator_the_summary_says_the_bytes_were_not_decoded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blobs = _blobs()
    blobs[BAD] = b"\x78\x9c garbage"
    path = _write(tmp_path / "ds", blobs)
    code, lines = _validate(path, _manager(), capsys)
    assert code == 0, lines  # nothing decodes the payloads, so nothing can call them bad ...
    assert lines[-1] == (  # ... and nothing calls them good
        f"{path}: validated 1 file(s), {N} record(s): all {N} records read; payload bytes of {N} field(s) "
        "not decoded (no installed field validator claims them; installed: none)"
    )


def test_records_without_payloads_are_read_and_nothing_more_is_claimed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "ds").mkdir()
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": "x"} for i in range(3)]), tmp_path / "ds" / "t.parquet")
    pm = _manager(ZlibPlugin())
    package = pm.registry.get("validator", "zlib").package
    code, lines = _validate(tmp_path / "ds", pm, capsys)
    assert code == 0
    assert lines[-1].endswith(
        f"all 3 records read; no field payload decoded (installed field validators: zlib ({package}))"
    )


def test_nested_fields_are_offered_by_their_path() -> None:
    record = {"image": {"bytes": b"x", "path": "a.jpg"}, "frames": [b"1", b"2"], "tokens": [1, 2, 3], "n": 1}
    assert list(leaves(record)) == [
        ("image.bytes", b"x"),
        ("image.path", "a.jpg"),
        ("frames[0]", b"1"),
        ("frames[1]", b"2"),
        ("tokens", [1, 2, 3]),
        ("n", 1),
    ]


def test_a_validator_registration_is_checked_like_any_other() -> None:
    class Misspelled:
        @hookimpl
        def zephon_register_validators(self, register: Any) -> None:
            register(name="zlib", factory=check_zlib, detect=None)

    with pytest.raises(PluginError, match=r"register\(\) for a validator got unknown arguments \['detect'\]"):
        ZephonPluginManager(load_entrypoints=False, plugins=[Misspelled()])
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[ZlibPlugin()])
    assert [(r["name"], r["kind"]) for r in pm.listing() if r["kind"] == "validator"] == [("zlib", "validator")]


def test_the_root_name_validate_is_the_function_after_its_module_is_imported() -> None:
    import zephon_storage
    import zephon_storage.validation
    from zephon_storage import validate

    assert callable(validate) and validate is zephon_storage.validation.validate
