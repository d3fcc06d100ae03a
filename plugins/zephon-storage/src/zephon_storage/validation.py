"""``zephon index PATH --validate``: decode every record once, ahead of training, and list the bad ones.

A corrupt record is otherwise found when a run first reads it, which may be hours in. Validation
reads every record of every shard through the format's own reader (so it finds exactly what a run
would find) and reports each one that does not decode by file and position (the reader's message:
byte offset for JSON Lines, row for columnar formats, sample for LitData and MDS). Consecutive
records failing with the same message (a corrupt Parquet row group, a bad zstd frame) are reported
once, with their count. A file that cannot be read at all is reported as a whole.

A record that parses may still hold a payload its operators cannot decode (a corrupt JPEG in a
Parquet column or a WebDataset tar). The reader does not decode payloads, so the installed
*field validators* do (registered through :func:`~zephon_core.hookspecs.zephon_register_validators`
by decoder plugins, e.g. zephon-vision for images): each one is offered every field of every
record that was read, decodes the values of its kind, and each failure is reported by file, shard,
sample, field and reason. The result counts what was decoded by whom, and the payload bytes no
validator claimed, so the summary says exactly what was checked rather than "all good".

Shards are validated in parallel worker processes (decoding is CPU-bound and holds the GIL), each
reading its shard in blocks of :data:`BLOCK` records; a block with a bad record is read again one
record at a time to find each bad one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Reader, ReaderError, RecordError, ZephonError
from zephon_storage.location import StorageBacked

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

BLOCK = 1024
"""Records read per call while validating: large enough to amortise a call, small enough to narrow down."""

PARALLEL_MIN_RECORDS = 250_000
"""Below this many records the default is to validate in this process: starting worker processes
(importing the format's library in each) costs seconds, more than such a dataset takes."""


@dataclass(frozen=True)
class BadRecord:
    """A record (or a run of consecutive records) that does not decode, or a whole unreadable file.

    Attributes:
        shard: the shard's number in the reader's shard list.
        file: the shard's id (its path relative to the dataset root).
        first: the first bad record's index within the shard.
        count: consecutive bad records with the same message (the rest of the shard for a file).
        message: the reader's error, which names the file and the position.
        whole_file: the file itself could not be read (missing, truncated, not this format).
    """

    shard: int
    file: str
    first: int
    count: int
    message: str
    whole_file: bool = False

    def line(self) -> str:
        """The report line: the reader's message, plus the extent of a run of records."""
        if self.whole_file:
            return f"{self.message} (whole file: records {self.first}-{self.first + self.count - 1} not checked)"
        if self.count > 1:
            return f"{self.message} ({self.count} records: {self.first}-{self.first + self.count - 1})"
        return self.message


@dataclass(frozen=True)
class FieldValidator:
    """An installed field validator: the kind of payload it decodes, who provides it, and its check.

    Attributes:
        name: the kind of payload (``"image"``), as the summary counts it.
        package: the distribution that registered it.
        check: a :data:`~zephon_core.hookspecs.FieldCheck` or a ``"module:attr"`` string naming one
            (resolved in each worker process, so the validator travels as a string).
    """

    name: str
    package: str
    check: Any

    @property
    def label(self) -> str:
        """``"image (zephon-vision)"``: how messages name the validator."""
        return f"{self.name} ({self.package})"


def field_validators(plugins: ZephonPluginManager) -> list[FieldValidator]:
    """Every field validator the manager's plugins registered, by name."""
    registry = plugins.registry
    return [
        FieldValidator(name, reg.package, reg.factory)
        for name in registry.names("validator")
        for reg in [registry.items[("validator", name)]]
    ]


@dataclass(frozen=True)
class BadField:
    """A field whose payload a field validator could not decode (the record itself was read).

    Attributes:
        shard: the shard's number in the reader's shard list.
        file: the shard's file (its URL, or its id when the reader has no storage).
        sample: the record's index within the shard.
        field: the field (``"outer.inner"`` inside a dict, ``"name[3]"`` inside a list).
        validator: the validator's :attr:`FieldValidator.label`.
        reason: the validator's error.
        key: the record's ``__key__`` when it has one (a WebDataset sample's name in its tar).
    """

    shard: int
    file: str
    sample: int
    field: str
    validator: str
    reason: str
    key: str | None = None

    def line(self) -> str:
        """The report line, naming file, sample, shard (and key), field, validator and reason."""
        where = f"shard {self.shard}" + (f", key {self.key!r}" if self.key is not None else "")
        return (
            f"{self.file}: sample {self.sample} ({where}), field {self.field!r}: "
            f"does not decode as {self.validator}: {self.reason}"
        )


@dataclass
class ShardReport:
    """What validating one shard found: records checked, the bad ones, and what the validators did.

    ``decoded`` and ``failed`` count fields per validator, in the order of the validators given.
    """

    shard: int
    records: int
    bad: list[BadRecord] = field(default_factory=list)
    bad_fields: list[BadField] = field(default_factory=list)
    decoded: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    undecoded: int = 0
    """Bytes values that no validator claimed: read, but their payload not decoded."""


@dataclass
class Validation:
    """The result of :func:`validate`.

    Attributes:
        files: shards validated.
        records: records checked.
        bad: every bad record (runs merged) and unreadable file, in shard and record order.
    """

    files: int
    records: int
    bad: list[BadRecord]
    bad_fields: list[BadField] = field(default_factory=list)
    validators: list[FieldValidator] = field(default_factory=list)
    decoded: list[int] = field(default_factory=list)
    """Fields each of :attr:`validators` decoded, in their order."""
    failed: list[int] = field(default_factory=list)
    """Fields each of :attr:`validators` found undecodable, in their order."""
    undecoded: int = 0
    """Bytes values that no validator claimed: their payload was read but not decoded."""

    @property
    def bad_records(self) -> int:
        """Records that do not decode (not counting unreadable files)."""
        return sum(b.count for b in self.bad if not b.whole_file)

    @property
    def bad_files(self) -> int:
        """Files that could not be read at all."""
        return sum(1 for b in self.bad if b.whole_file)

    @property
    def ok(self) -> bool:
        """No bad record, no unreadable file and no field that failed to decode."""
        return not self.bad and not self.bad_fields

    def checked(self) -> str:
        """What was checked, for the summary line: records read, fields decoded by whom, bytes left undecoded.

        Worded so that it never claims more than was done: a dataset whose payloads no installed
        validator decodes is said to have been read, and its bytes not decoded.
        """
        read = self.records - self.bad_records
        parts = [
            f"all {self.records:,} records read"
            if not self.bad_records
            else f"{read:,} of {self.records:,} records read"
        ]
        for v, ok, bad in zip(self.validators, self.decoded, self.failed, strict=True):
            if ok or bad:
                what = f"{ok:,} of {ok + bad:,}" if bad else f"{ok:,}"
                parts.append(f"{what} {v.name} field(s) decoded by {v.package}")
        installed = ", ".join(v.label for v in self.validators) or "none"
        if self.undecoded:
            parts.append(
                f"payload bytes of {self.undecoded:,} field(s) not decoded (no installed field validator claims them; "
                f"installed: {installed})"
            )
        elif not any(self.decoded) and not any(self.failed):
            parts.append(f"no field payload decoded (installed field validators: {installed})")
        return "; ".join(parts)


Progress = Callable[[int, int, int, int], None]
"""``progress(files_done, files_total, records_checked, bad)``, called after each shard (``bad``: records
that do not decode plus fields a validator could not decode)."""


_BYTES = (bytes, bytearray, memoryview)
_CONTAINERS = (*_BYTES, dict, list, tuple, np.ndarray)


def leaves(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every field of ``record`` as ``(name, value)``, nested dicts and lists of payloads opened.

    A dict's fields are named ``"outer.inner"`` (Hugging Face image columns are
    ``{"bytes": ..., "path": ...}``), a list's items ``"name[3]"`` when its first item is bytes or a
    container (several images per sample); a list of numbers is one value, not walked.
    """

    def walk(name: str, value: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(f"{name}.{k}" if name else str(k), v)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], _CONTAINERS):
            for i, v in enumerate(value):
                yield from walk(f"{name}[{i}]", v)
        else:
            yield name, value

    return walk("", record)


def _reason(exc: BaseException) -> str:
    """A validator's error as one line; anything but a ``ValueError`` is named by its type."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, ValueError) else f"{type(exc).__name__}: {text}"


def _file_of(reader: Reader, shard_id: str) -> str:
    """The shard's file as a user would paste it (its URL), or its id for a reader without storage."""
    try:
        return str(reader.storage.url_of(shard_id)) if isinstance(reader, StorageBacked) else shard_id
    except Exception:
        return shard_id


class _Checker:
    """Runs the field validators over records, filling a :class:`ShardReport` (one per shard)."""

    def __init__(self, validators: Sequence[FieldValidator], report: ShardReport, file: str) -> None:
        from zephon_core.plugin_api import load_object

        self.validators = list(validators)
        self.checks: list[Callable[[str, Any], bool]] = [load_object(v.check) for v in self.validators]
        self.report, self.file = report, file
        report.decoded = [0] * len(self.validators)
        report.failed = [0] * len(self.validators)

    def record(self, sample: int, record: Any) -> None:
        if not isinstance(record, dict):
            return
        rep = self.report
        key = record.get("__key__")
        key = key if isinstance(key, str) else None
        for name, value in leaves(record):
            claimed = False
            for k, check in enumerate(self.checks):
                try:
                    if not check(name, value):
                        continue
                except Exception as exc:  # the payload does not decode: the validator's reason
                    rep.failed[k] += 1
                    rep.bad_fields.append(
                        BadField(rep.shard, self.file, sample, name, self.validators[k].label, _reason(exc), key)
                    )
                else:
                    rep.decoded[k] += 1
                claimed = True
            if not claimed and isinstance(value, _BYTES):
                rep.undecoded += 1


def validate_shard(
    reader: Reader, shard: int, block: int = BLOCK, validators: Sequence[FieldValidator] = ()
) -> ShardReport:
    """Decode every record of ``shard``; a ``RecordError`` is a bad record, any other error a bad file.

    Every record read is then offered, field by field, to each of ``validators``.
    """
    info = reader.shards()[shard]
    report = ShardReport(shard, 0)
    checker = _Checker(validators, report, _file_of(reader, info.id))

    def bad(first: int, message: str, count: int = 1) -> None:
        last = report.bad[-1] if report.bad else None
        if last is not None and not last.whole_file and last.message == message and last.first + last.count == first:
            report.bad[-1] = BadRecord(shard, info.id, last.first, last.count + count, message)
        else:
            report.bad.append(BadRecord(shard, info.id, first, count, message))

    n = info.num_samples
    for start in range(0, n, block):
        idx = np.arange(start, min(n, start + block), dtype=np.int64)
        try:
            try:
                records = reader.read(shard, idx)
            except RecordError:
                for i in idx.tolist():
                    try:
                        one = reader.read(shard, np.array([i], dtype=np.int64))
                    except RecordError as exc:
                        bad(i, str(exc))
                    else:
                        checker.record(i, one[0])
            else:
                for i, rec in zip(idx.tolist(), records, strict=True):
                    checker.record(i, rec)
        except ZephonError as exc:
            report.bad.append(BadRecord(shard, info.id, start, n - start, str(exc), whole_file=True))
            report.records = start
            return report
        except Exception as exc:  # a library fault the reader did not wrap: the file is unreadable
            message = f"{info.id}: {type(exc).__name__}: {exc}"
            report.bad.append(BadRecord(shard, info.id, start, n - start, message, whole_file=True))
            report.records = start
            return report
    report.records = n
    return report


def validate(
    reader: Reader,
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    validators: Sequence[FieldValidator] = (),
) -> Validation:
    """Validate every shard of ``reader`` (in ``jobs`` worker processes); see the module docstring.

    Args:
        reader: any reader (it must pickle when ``jobs > 1``).
        jobs: worker processes; default: the CPUs, at most one per shard (this process alone below
            :data:`PARALLEL_MIN_RECORDS` records). 1 validates in this process.
        progress: called after each shard (see :data:`Progress`).
        validators: field validators run on every record read (:func:`field_validators` gives the
            installed ones); none: records are only read.
    """
    validators = list(validators)
    try:
        shards = reader.shards()
    except ZephonError:
        raise
    except Exception as exc:
        raise ReaderError(f"cannot list the dataset's shards: {type(exc).__name__}: {exc}") from exc
    total = len(shards)
    if jobs is None and sum(s.num_samples for s in shards) < PARALLEL_MIN_RECORDS:
        jobs = 1
    jobs = max(1, min(jobs or os.cpu_count() or 1, total))
    reports: list[ShardReport] = []

    def done(report: ShardReport) -> None:
        reports.append(report)
        if progress is not None:
            bad = sum(b.count for r in reports for b in r.bad if not b.whole_file) + sum(
                len(r.bad_fields) for r in reports
            )
            progress(len(reports), total, sum(r.records for r in reports), bad)

    if jobs == 1:
        for s in range(total):
            done(validate_shard(reader, s, validators=validators))
    else:
        with ProcessPoolExecutor(
            jobs, mp_context=_context(), initializer=_init_worker, initargs=(pickle.dumps((reader, validators)),)
        ) as pool:
            pending: set[Future[ShardReport]] = {pool.submit(_validate_in_worker, s) for s in range(total)}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    done(fut.result())
    reports.sort(key=lambda r: r.shard)
    width = len(validators)
    return Validation(
        total,
        sum(r.records for r in reports),
        [b for r in reports for b in r.bad],
        bad_fields=[b for r in reports for b in r.bad_fields],
        validators=validators,
        decoded=[sum(r.decoded[k] for r in reports if r.decoded) for k in range(width)],
        failed=[sum(r.failed[k] for r in reports if r.failed) for k in range(width)],
        undecoded=sum(r.undecoded for r in reports),
    )


def _context() -> Any:
    """forkserver where available (no fork of a threaded parent), else spawn."""
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


_worker_reader: Reader | None = None
_worker_validators: list[FieldValidator] = []


def _init_worker(blob: bytes) -> None:
    global _worker_reader, _worker_validators
    _worker_reader, _worker_validators = pickle.loads(blob)


def _validate_in_worker(shard: int) -> ShardReport:
    assert _worker_reader is not None
    return validate_shard(_worker_reader, shard, validators=_worker_validators)
