"""``HFReader``: the ``hf`` format's factory, which picks the reader for the folder's layout.

A ``save_to_disk`` folder holds Arrow files and a hub repository Parquet files; the two need
different readers (:class:`~zephon_hf.arrow.ArrowReader`, :class:`~zephon_hf.parquet.HubParquetReader`)
that take the same ``config=``/``split=`` options. Which one is decided by one listing of the root
folder (``state.json``, ``dataset_dict.json``, or ``dataset_info.json`` beside ``.arrow`` files),
so a remote dataset costs one request here.
"""

from __future__ import annotations

from typing import Any

from zephon_storage import Storage, split_storage_options

from zephon_hf.base import HFFiles
from zephon_hf.layout import is_arrow_root


def is_arrow_dataset(storage: Storage) -> bool:
    """Whether the root is a folder of HF Arrow files (or one ``.arrow`` file) rather than Parquet."""
    if storage.is_single_file:
        return storage.url.rstrip("/").lower().endswith(".arrow")
    base = storage.full_path("").rstrip("/")
    found = storage.call(lambda: storage.fs.ls(base, detail=False), storage.url)
    return is_arrow_root([str(p).rstrip("/").rsplit("/", 1)[-1] for p in found])


def HFReader(path: str, **options: Any) -> HFFiles:
    """The reader of a Hugging Face dataset on disk: a ``save_to_disk`` folder or a hub Parquet layout.

    Args:
        path: a ``save_to_disk`` / ``DatasetDict`` / ``datasets`` cache folder, a hub-style
            repository of Parquet files, or one ``.arrow`` or ``.parquet`` file; a local path or
            an fsspec URL.
        options: ``config=``, ``split=`` and the options of
            :class:`~zephon_hf.arrow.ArrowReader` or :class:`~zephon_hf.parquet.HubParquetReader`.

    Raises:
        ConfigError: an unknown option (the message lists the valid ones), or an unknown or
            missing config or split (the message lists the folder's).
        ReaderError: the path does not exist or is not a Hugging Face dataset.
    """
    storage, _ = split_storage_options(options)
    if is_arrow_dataset(Storage(path, **storage)):
        from zephon_hf.arrow import ArrowReader

        return ArrowReader(path, **options)
    from zephon_hf.parquet import HubParquetReader

    return HubParquetReader(path, **options)
