"""Errors raised by Zephon: every one derives from :class:`ZephonError`, so a training script can catch
one type; subclasses say *where* the fault lies (configuration, a reader, an operator, a checkpoint)."""

from __future__ import annotations


class ZephonError(Exception):
    """Base class of every error Zephon raises on purpose.

    Attributes:
        index: set by a worker when the error concerns one item of its task (its position), so the
            stage can name exactly the sample at fault."""

    index: int | None = None


class ConfigError(ZephonError, ValueError):
    """An option, dataset or pipeline definition is invalid; raised when the pipeline is built."""


class PluginError(ZephonError):
    """A plugin is missing, misspelled, registered twice or broken."""


class ReaderError(ZephonError):
    """A dataset file or shard cannot be listed or read (missing, truncated, corrupt)."""


class RecordError(ReaderError):
    """A record does not decode (invalid JSON, a corrupt value) although its shard is intact.

    Damage confined to the records asked for, so ``on_error="skip"`` can drop exactly those (a tombstone);
    a missing, short or unreadable file stays a :class:`ReaderError`, as skipping it would lose data."""


class OperatorError(ZephonError):
    """A worker or accumulator of an operator raised; names the operator and the samples."""


class CheckpointError(ZephonError, ValueError):
    """A checkpoint is malformed or belongs to a different pipeline."""


class WorkerCrashedError(OperatorError):
    """A worker process died (killed, segfault, out of memory) while holding a task."""


class OperatorTimeoutError(OperatorError):
    """A task of an operator ran past its ``timeout_s``; names the operator, runner and samples."""
