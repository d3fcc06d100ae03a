"""``zephon index``: build a dataset's index files and manifest ahead of time, in parallel.

The format's index builder (registered by its reader plugin as ``index=``) does the work. Builders
may take, besides the path:

* ``checksum`` — record each file's SHA-256 in the manifest;
* ``jobs`` — how many files to index at once (a thread pool inside the builder: indexing is file
  reads and hashing, which release the GIL, so threads suffice and nothing is pickled);
* ``progress`` — a ``progress(done, total)`` callback called after each file.

Each is passed only when the builder's signature names it, so older plugins keep working. On a
terminal a bar shows files done; otherwise nothing but the one summary line is printed, so scripts
can parse the output.

``--validate`` then reads every record through the format's reader and offers every field to the
installed field validators (decoder plugins' ``zephon_register_validators``, e.g. zephon-vision
decodes images); the summary line says what was read, what each validator decoded and which
payload bytes no validator decoded, so "valid" never means more than what was checked.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from typing import TYPE_CHECKING, Any

from zephon_core import ConfigError

if TYPE_CHECKING:
    from zephon_core.plugin_api import Progress, ZephonPluginManager


def default_jobs() -> int:
    """Threads (and, for ``--validate``, processes) when ``--jobs`` is not given: the usable CPUs."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class FileProgress:
    """A ``progress(done, total)`` callback that draws a bar on a terminal and nothing elsewhere.

    The bar is created on the first call because only the builder knows how many files there are.
    """

    def __init__(self, desc: str, draw: bool | None = None) -> None:
        self.desc, self.draw = desc, draw
        self.bar: Progress | None = None
        self.calls = 0

    def __call__(self, done: int, total: int) -> None:
        from zephon_core.plugin_api import Progress

        self.calls += 1
        if self.bar is None:
            self.bar = Progress(total, self.desc, "files", draw=self.draw)
        self.bar.set(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def build(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Build the format's index and manifest (``--checksum``: with content checksums), then ``--validate``.

    Exit status 1 when validation finds a bad record or file; 2 for an error before that.
    """
    from zephon_core.plugin_api import load_object

    registry = plugins.registry
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    fmt = args.format or registry.detect_format(args.path)
    reg = registry.get("reader", fmt)
    builder = reg.extra.get("index")
    if builder is None:
        if args.checksum:
            raise ConfigError(f"format {fmt!r} has no index builder, so it cannot record checksums")
        print(f"{args.path}: format {fmt!r} needs no index")
    else:
        make = load_object(builder)
        accepts = inspect.signature(make).parameters
        if args.checksum and "checksum" not in accepts:
            raise ConfigError(
                f"format {fmt!r} ({reg.package}): its index builder takes no checksum= argument, "
                "so it cannot record checksums"
            )
        kwargs: dict[str, Any] = {"checksum": True} if args.checksum else {}
        if "jobs" in accepts:
            kwargs["jobs"] = jobs
        if "progress" in accepts:
            bar = FileProgress(f"indexing {args.path}")
            try:
                built = make(args.path, progress=bar, **kwargs)
            finally:
                bar.close()
        else:
            from zephon_core.plugin_api import Ticker

            with Ticker(f"indexing {args.path}"):  # elapsed time on a terminal; silent otherwise
                built = make(args.path, **kwargs)
        print(f"{args.path}: {built}")
    if not args.validate:
        return 0
    from zephon_storage.validation import field_validators, validate

    reader = registry.make_reader(fmt, args.path)
    try:
        result = validate(
            reader,
            jobs=args.jobs,
            progress=_validate_progress if sys.stderr.isatty() else None,
            validators=field_validators(plugins),
        )
    finally:
        reader.close()
    for bad in result.bad:
        print(bad.line())
    for field in result.bad_fields:
        print(field.line())
    if result.ok:
        verdict = result.checked()
    else:
        verdict = f"{result.bad_records} bad record(s), {result.bad_files} unreadable file(s)"
        if result.bad_fields:
            verdict += f", {len(result.bad_fields)} field(s) that do not decode"
        verdict += f"; {result.checked()}"
    print(f"{args.path}: validated {result.files} file(s), {result.records} record(s): {verdict}")
    return 0 if result.ok else 1


def _validate_progress(done: int, total: int, records: int, bad: int) -> None:
    """Progress of ``--validate`` on one terminal line (only when stderr is a terminal)."""
    end = "\n" if done == total else ""
    print(f"\rvalidating: {done}/{total} files, {records} records, {bad} bad", end=end, file=sys.stderr, flush=True)
