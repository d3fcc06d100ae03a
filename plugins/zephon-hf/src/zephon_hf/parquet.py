"""``HubParquetReader``: one config and split of a hub-style Parquet repository.

Reading the Parquet files is exactly what ``zephon-parquet`` does (footers as the row index, row
groups decoded once into a byte-bounded cache, page checksums, ``zephon index`` row-group sizes,
``on_error="skip"`` per row group), so this reader *is* a :class:`~zephon_parquet.reader.ParquetReader`
and changes one thing: which files it lists (:class:`~zephon_hf.base.HFFiles`). Copying that reader
instead would duplicate its most tuned code, and the copies would drift, which is why the kernel
grew :class:`~zephon_storage.FileReader` in the first place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zephon_parquet.reader import DEFAULT_ROW_GROUP_CACHE, ParquetReader

from zephon_core import ShardInfo
from zephon_hf.base import HFFiles, name_option


class HubParquetReader(HFFiles, ParquetReader):
    """Reads one config and split of a hub-style repository of Parquet files.

    The files come from the README's ``configs:`` section when it has one, else from the file
    names (``data/<split>-00000-of-00002.parquet``, ``<config>/<split>-*.parquet``, split keywords),
    in the order ``datasets.load_dataset`` reads them.

    Args:
        path: the repository folder (local path or fsspec URL), or one ``.parquet`` file.
        config: the config (``load_dataset``'s ``name``); None: the default one (marked
            ``default: true``, named ``default``, or the only one).
        split: the split; None when the config has exactly one.
        columns, row_group_cache_bytes, verify_checksums, prefetch, open_files, manifest:
            as for ``zephon-parquet`` (:class:`~zephon_parquet.reader.ParquetReader`).
        **storage: :class:`~zephon_storage.Storage` options, ``verify``, ``on_error`` and
            ``max_bad_fraction``; any other name is a ``ConfigError`` listing the valid options.
    """

    def __init__(
        self,
        path: str,
        *,
        config: str | None = None,
        split: str | None = None,
        columns: Sequence[str] | None = None,
        row_group_cache_bytes: int | str = DEFAULT_ROW_GROUP_CACHE,
        verify_checksums: bool = True,
        prefetch: int = 0,
        open_files: int = 16,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        self.config = name_option(config, "config")
        self.split = name_option(split, "split")
        self.selection = None
        super().__init__(
            path,
            columns=columns,
            row_group_cache_bytes=row_group_cache_bytes,
            verify_checksums=verify_checksums,
            prefetch=prefetch,
            open_files=open_files,
            manifest=manifest,
            **storage,
        )
        self.files()  # resolve config and split now: a bad choice is a ConfigError from the constructor

    def shards(self) -> list[ShardInfo]:
        """One shard per Parquet file of the split (footers only), in ``load_dataset``'s order."""
        shards = super().shards()
        self._check_rows([s.num_samples for s in shards])
        return shards
