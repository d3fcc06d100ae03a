"""What the two HF readers share: listing one config and split instead of every data file.

:class:`~zephon_storage.FileReader` lists a folder's data files by suffix. A Hugging Face
folder holds several splits (and configs) side by side, so :class:`HFFiles` replaces that listing:
it resolves the requested (config, split) with :mod:`zephon_hf.layout` and holds exactly those files
to the ``zephon index`` manifest, which covers the whole folder (every config and split) so that
one ``_zephon_manifest.json`` serves a reader of any split.
"""

from __future__ import annotations

from typing import Any

from zephon_storage import (
    FileInfo,
    FileReader,
    ManifestEntry,
    Storage,
    check_listing,
    is_private_path,
    read_manifest,
)

from zephon_core import ConfigError, ReaderError
from zephon_hf.layout import Catalog, Selection, catalog

FORMAT = "hf"


def name_option(value: Any, option: str) -> str | None:
    """Validate a ``config=`` / ``split=`` option: None or a non-empty string."""
    if value is None or (isinstance(value, str) and value):
        return value
    raise ConfigError(f"{FORMAT} reader: {option} must be a non-empty string or None, got {value!r}")


def root_url(storage: Storage) -> str:
    """The dataset root's URL, for messages."""
    return storage.url if storage.is_single_file else storage.url_of("").rstrip("/")


def list_visible(storage: Storage) -> list[FileInfo]:
    """Every file under the root, except private ones (``.git*``, ``_zephon_manifest.json``)."""
    return storage.list_files(lambda rel: not is_private_path(rel))


def folder_catalog(storage: Storage, listing: list[FileInfo] | None = None) -> Catalog:
    """Every config and split under ``storage`` (reads ``state.json``, ``dataset_dict.json`` or ``README.md``)."""
    names = [f.rel for f in (listing if listing is not None else list_visible(storage))]
    return catalog(names, storage.read_bytes, where=root_url(storage), single_file=storage.is_single_file)


class HFFiles(FileReader):
    """A :class:`FileReader` whose files are one config and split of a Hugging Face dataset folder.

    Subclasses set ``self.config`` and ``self.split`` (validated by :func:`name_option`) before
    anything lists files. After listing, :attr:`selection` says which files were chosen and why.
    """

    format = FORMAT
    config: str | None
    split: str | None
    selection: Selection | None

    def _where(self) -> str:
        """The dataset root's URL, for messages."""
        return root_url(self.storage)

    def _list_files(self) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
        """The selected files, in row order, checked to exist and held to the manifest's entries for them."""
        listing = list_visible(self.storage)
        names = [f.rel for f in listing]
        selection = folder_catalog(self.storage, listing).select(names, self.config, self.split, self._where())
        by_rel = {f.rel: f for f in listing}
        missing = [rel for rel in selection.files if rel not in by_rel]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ReaderError(f"{self.storage.url_of(missing[0])}: listed in {selection.source} but missing{more}")
        files = [by_rel[rel] for rel in selection.files]
        manifest = read_manifest(self.storage, self.format) if self.use_manifest else None
        if manifest is not None:
            check_listing(self.storage, files, {rel: e for rel, e in manifest.items() if selection.owns(rel)})
        self.selection = selection
        return files, manifest

    def _check_rows(self, counts: list[int]) -> None:
        """A split whose folder records its row count (a builder cache) must have exactly that many."""
        selection = self.selection
        if selection is not None and selection.expected_rows is not None and sum(counts) != selection.expected_rows:
            raise ReaderError(
                f"{self._where()}: split {selection.split!r} has {sum(counts)} rows in {len(counts)} files, "
                f"{selection.source} says {selection.expected_rows}: a file is missing, truncated or changed"
            )

    def describe(self) -> dict[str, Any]:
        """The fingerprint: the resolved layout, config and split (listing the files if needed)."""
        self.files()
        selection = self.selection
        assert selection is not None
        return {
            "format": self.format,
            "layout": selection.layout,
            "config": selection.config,
            "split": selection.split,
            "columns": getattr(self, "columns", None),
        }
