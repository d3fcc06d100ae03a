"""Which files of a Hugging Face dataset folder make up one config and split.

A Hugging Face dataset on disk is one of two kinds, and neither is "every data file in the folder":

* a ``save_to_disk`` folder: ``state.json`` lists the Arrow files of a ``Dataset`` (in row order);
  a ``DatasetDict`` folder has ``dataset_dict.json`` and one such folder per split. The builder
  cache that ``load_dataset`` leaves behind (``dataset_info.json`` beside ``<name>-<split>*.arrow``)
  is read the same way, its splits named by ``dataset_info.json``;
* a hub-style repository of Parquet files, where the README's YAML ``configs:`` section (when there
  is one) maps each config and split to ``data_files`` glob patterns, and otherwise file names do
  (``data/train-00000-of-00002.parquet``, ``<config>/<split>-00000-of-00001.parquet``, ...).

Reading the whole folder as one dataset would silently train on the test split too, so a reader
reads exactly one (config, split), resolved here. The rules follow the ``datasets`` library (its
``data_files.py`` and ``MetadataConfigs``), which the tests check against ``load_dataset`` itself.
This module only works on file names and the bytes of small JSON/README files, so detection and
these rules need neither pyarrow nor a file system.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zephon_core import ConfigError, ReaderError

STATE = "state.json"
DATASET_DICT = "dataset_dict.json"
DATASET_INFO = "dataset_info.json"
README = "README.md"

SPLIT_RE = re.compile(r"\w+(\.\w+)*\Z")
"""A valid split name (``datasets``' ``_split_re``: no dashes, so ``train-00000-of-...`` parses)."""

FILES_TO_IGNORE = frozenset(
    {"README.md", "config.json", "dataset_info.json", "dataset_infos.json", "dummy_data.zip", "dataset_dict.json"}
)
"""Names ``datasets`` never treats as data files, even when a pattern matches them."""

SHARDED = re.compile(r"data/(?P<split>\w+(?:\.\w+)*)-\d{5}-of-\d{5}[^/]*\.parquet\Z")
"""``data/{split}-NNNNN-of-NNNNN*.parquet``: ``push_to_hub``'s layout for the default config."""

CONFIG_SHARDED = re.compile(r"(?P<config>[^/]+)/(?P<split>\w+(?:\.\w+)*)-\d{5}-of-\d{5}[^/]*\.parquet\Z")
"""``{config}/{split}-NNNNN-of-NNNNN*.parquet``: ``push_to_hub(config_name=...)`` for other configs."""

CONVERTED = re.compile(r"(?P<config>[^/]+)/(?P<split>(?:partial-)?\w+(?:\.\w+)*)/\d+\.parquet\Z")
"""``{config}/{split}/NNNN.parquet``: the hub's automatic Parquet export (``refs/convert/parquet``)."""

_SEP = "-._ 0-9"
_KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
_IN_DIR = ("**/{k}/**", "**/{k}[{s}]*/**", "**/*[{s}]{k}/**", "**/*[{s}]{k}[{s}]*/**")
_IN_NAME = ("**/{k}[{s}]*", "**/*[{s}]{k}[{s}]*")
DEFAULT_PATTERNS: tuple[dict[str, list[str]], ...] = (
    *(
        {split: [p.format(k=k, s=_SEP) for k in keywords for p in patterns] for split, keywords in _KEYWORDS.items()}
        for patterns in (_IN_DIR, _IN_NAME)
    ),
    {"train": ["**"]},
)
"""``datasets``' fallbacks when no file is named ``data/{split}-NNNNN-of-NNNNN``: split keywords in a
folder name, then in a file name, then every file is ``train`` (``DEFAULT_PATTERNS_SPLIT_IN_DIR_NAME``,
``..._IN_FILENAME``, ``..._ALL`` for fsspec >= 2023.12)."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regex of an fsspec/``datasets`` glob pattern over paths relative to the dataset root.

    ``*`` and ``?`` stay within one path segment, ``[...]`` is a character class (``[!...]``
    negated), and ``**`` as a whole segment matches any number of segments (``**`` inside a
    segment is a ``*``, as in Python's ``glob`` and fsspec >= 2023.12).
    """
    segments = [s for s in pattern.strip("/").split("/") if s not in ("", ".")]
    out = ""
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if seg == "**":
            out += ".*" if last else "(?:[^/]+/)*"
        else:
            out += _segment_regex(seg) + ("" if last else "/")
    return re.compile(out + r"\Z")


def _segment_regex(seg: str) -> str:
    out, i = "", 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i < len(seg) and seg[i] == "*":
                i += 1
            out += "[^/]*"
            continue
        if c == "?":
            out += "[^/]"
        elif c == "[":
            end = seg.find("]", i + 2)
            if end < 0:
                out += re.escape(c)
            else:
                body = seg[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\").replace("^", "\\^")
                out += "[" + ("^" if negate else "") + body + "]"
                i = end + 1
                continue
        else:
            out += re.escape(c)
        i += 1
    return out


def is_hidden(rel: str) -> bool:
    """A path ``datasets`` skips unless asked for: a part starting with ``.`` or ``__`` (``__pycache__``)."""
    return any(part.startswith((".", "__")) for part in rel.split("/"))


def _is_parquet(rel: str) -> bool:
    return rel.lower().endswith(".parquet")


def _ignored(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1] in FILES_TO_IGNORE or is_hidden(rel)


@dataclass(frozen=True)
class Split:
    """How one (config, split) names its files: listed (Arrow folders) or by patterns (hub layouts).

    Attributes:
        files: the data files in row order, when the folder lists them (``state.json``).
        patterns: regexes over root-relative paths, when ``data_files`` patterns or file names
            define the split; its files are the Parquet files matching them, pattern by pattern.
        expected_rows: the split's row count when the folder records it (builder cache), else None.
        inferred: the patterns come from file names, not from the dataset card: like ``datasets``,
            keep only the data files they match (Parquet here) instead of refusing other files.
    """

    files: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()
    expected_rows: int | None = None
    inferred: bool = False


@dataclass(frozen=True)
class Selection:
    """One config and split of a dataset folder: its data files and how they were found.

    Attributes:
        layout: ``"save_to_disk"``, ``"dataset_dict"``, ``"cache"`` (Arrow files), ``"hub"``
            (Parquet files) or ``"file"`` (the root is one data file).
        config: the config (hub layouts; None for Arrow folders).
        split: the split (None when the folder names none).
        files: data files relative to the root, in row order.
        source: what defined them, for messages (``"state.json"``, ``"README.md configs"``, ...).
        patterns: see :class:`Split`; a new file matching them is one the manifest must know.
        expected_rows: see :class:`Split`.
    """

    layout: str
    config: str | None
    split: str | None
    files: tuple[str, ...]
    source: str
    patterns: tuple[re.Pattern[str], ...] = ()
    expected_rows: int | None = None

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` belongs to this selection (listed, or a Parquet file matching its patterns)."""
        if rel in self.files:
            return True
        return _is_parquet(rel) and not _ignored(rel) and any(p.match(rel) for p in self.patterns)


@dataclass(frozen=True)
class Catalog:
    """Every config and split of a dataset folder, and which config is the default.

    Arrow folders have one config, ``None``. Built by :func:`catalog`; :meth:`select` picks one
    (config, split) the way ``load_dataset(path, name=config, split=split)`` would.
    """

    layout: str
    source: str
    configs: dict[str | None, dict[str | None, Split]]
    default: str | None

    def choices(self) -> list[tuple[str | None, str | None]]:
        """Every (config, split): what ``zephon index`` covers."""
        return [(c, s) for c, splits in self.configs.items() for s in splits]

    def select(self, names: Sequence[str], config: str | None, split: str | None, where: str) -> Selection:
        """The files of (``config``, ``split``); None picks the default config and the only split.

        Raises:
            ConfigError: an unknown config or split (naming the valid ones), or an ambiguous one
                (several configs and no default, several splits) left as None.
            ReaderError: the selection matches no file, or a file that is not Parquet.
        """
        arrow = self.layout in ("save_to_disk", "dataset_dict", "cache", "file")
        if arrow and config is not None:
            kind = "one data file" if self.layout == "file" else "a save_to_disk/Arrow folder"
            raise ConfigError(f"hf reader: {where} is {kind}, which has no configs (drop config=)")
        if self.layout in ("file", "save_to_disk") and split is not None:
            (own,) = self.configs[None]
            if split != own:
                saved = f"split {own!r}" if own else "no split name"
                raise ConfigError(
                    f"hf reader: {where} is one saved Dataset with {saved}, not split {split!r} (drop split=)"
                )
        chosen = (
            self.default
            if config is None and self.default is not None
            else _pick("config", config, list(self.configs), where, "")
        )
        splits = self.configs[chosen]
        in_config = f" in config {chosen!r}" if chosen is not None else ""
        if not splits:
            raise ReaderError(f"{where}: config {chosen!r} ({self.source}) matches no Parquet data file")
        name = (
            next(iter(splits))
            if self.layout in ("file", "save_to_disk")
            else _pick("split", split, list(splits), where, in_config)
        )
        entry = splits[name]
        files = list(entry.files)
        ordered = sorted(names)
        candidates = [n for n in ordered if not _ignored(n) and (_is_parquet(n) or not entry.inferred)]
        for p in entry.patterns:  # pattern by pattern, each sorted: the order datasets reads them in
            files.extend(n for n in candidates if p.match(n) and n not in files)
        what = f"config {chosen!r}, split {name!r} ({self.source})" if chosen is not None else f"split {name!r}"
        if not files:
            raise ReaderError(f"{where}: {what} matches no data file")
        if not arrow:
            other = [f for f in files if not _is_parquet(f)]
            if other:
                raise ReaderError(
                    f"{_join(where, other[0])}: {what} includes this file, but zephon-hf reads Parquet data files "
                    "only (read other formats with their own reader, e.g. format='jsonl')"
                )
        source = f"{name}/{STATE}" if self.layout == "dataset_dict" else self.source
        return Selection(self.layout, chosen, name, tuple(files), source, entry.patterns, entry.expected_rows)


Read = Callable[[str], bytes]
"""``read(rel)``: the bytes of a small file under the root (a ReaderError when it cannot be read)."""


def is_arrow_root(names: Sequence[str]) -> bool:
    """Whether a folder's listing is a folder of HF Arrow files rather than a hub-style repository.

    ``state.json`` (a ``Dataset``), ``dataset_dict.json`` (a ``DatasetDict``), or ``dataset_info.json``
    beside ``.arrow`` files (a builder cache), all at the root. Only names at the root count, so a
    listing of the root folder alone is enough.
    """
    top = {n for n in names if "/" not in n}
    if STATE in top or DATASET_DICT in top:
        return True
    return DATASET_INFO in top and any(n.lower().endswith(".arrow") for n in top)


def catalog(names: Sequence[str], read: Read, *, where: str, single_file: bool = False) -> Catalog:
    """Every config and split of the dataset whose files (relative to the root) are ``names``.

    Args:
        names: the listing, relative to the root (a single-file root: just its name).
        read: reads a small file of the root (``state.json``, ``README.md``, ...).
        where: the root's URL, which every error names.
        single_file: the root is one data file.

    Raises:
        ReaderError: the folder is not a dataset this reader understands, or its metadata is broken.
    """
    if single_file:
        return Catalog("file", "the path", {None: {None: Split(files=(names[0],))}}, None)
    if is_arrow_root(names):
        return _arrow_catalog(names, read, where)
    return _hub_catalog(names, read, where)


def resolve(
    names: Sequence[str],
    read: Read,
    *,
    config: str | None,
    split: str | None,
    where: str,
    single_file: bool = False,
) -> Selection:
    """:func:`catalog` then :meth:`Catalog.select`: the files of one (config, split)."""
    return catalog(names, read, where=where, single_file=single_file).select(names, config, split, where)


def _json(read: Read, rel: str, where: str) -> Any:
    raw = read(rel)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReaderError(f"{_join(where, rel)}: not valid JSON ({exc})") from None


def _join(where: str, rel: str) -> str:
    return f"{where.rstrip('/')}/{rel}" if rel else where


def _pick(kind: str, wanted: str | None, valid: Sequence[str | None], where: str, what: str) -> Any:
    """``wanted`` if valid; the only choice when None; else a ConfigError naming the valid ones."""
    if wanted is None:
        if len(valid) == 1:
            return valid[0]
        raise ConfigError(
            f"hf reader: {where} has {kind}s {list(valid)}{what}; pass {kind}= to choose one (e.g. {kind}={valid[0]!r})"
        )
    if wanted not in valid:
        raise ConfigError(f"hf reader: {where} has no {kind} {wanted!r}{what}; valid {kind}s: {list(valid)}")
    return wanted


# -- Arrow folders -----------------------------------------------------------------------------------
def _state_files(read: Read, folder: str, where: str) -> tuple[str | None, tuple[str, ...]]:
    """The split name and the Arrow files a ``save_to_disk`` ``state.json`` lists (root-relative)."""
    rel = f"{folder}/{STATE}" if folder else STATE
    state = _json(read, rel, where)
    try:
        files = tuple(f"{folder}/{d['filename']}" if folder else str(d["filename"]) for d in state["_data_files"])
    except (KeyError, TypeError) as exc:
        raise ReaderError(f"{_join(where, rel)}: not a save_to_disk state file (no _data_files: {exc!r})") from None
    if not files:
        raise ReaderError(f"{_join(where, rel)}: lists no data files")
    own = state.get("_split")
    return (str(own) if own is not None else None), files


def _arrow_catalog(names: Sequence[str], read: Read, where: str) -> Catalog:
    top = {n for n in names if "/" not in n}
    if DATASET_DICT in top:
        doc = _json(read, DATASET_DICT, where)
        splits = doc.get("splits") if isinstance(doc, dict) else None
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
            raise ReaderError(f"{_join(where, DATASET_DICT)}: no list of splits ({doc!r:.200})")
        return Catalog(
            "dataset_dict", STATE, {None: {s: Split(files=_state_files(read, s, where)[1]) for s in splits}}, None
        )
    if STATE in top:
        own, files = _state_files(read, "", where)
        return Catalog("save_to_disk", STATE, {None: {own: Split(files=files)}}, None)
    return _cache_catalog(top, read, where)


def _cache_catalog(top: set[str], read: Read, where: str) -> Catalog:
    """A builder cache folder: ``dataset_info.json`` names the splits, files are ``<name>-<split>*.arrow``."""
    info = _json(read, DATASET_INFO, where)
    splits_info = info.get("splits") if isinstance(info, dict) else None
    if not isinstance(splits_info, dict) or not splits_info:
        raise ReaderError(
            f"{_join(where, DATASET_INFO)}: no splits recorded, and no {STATE} or {DATASET_DICT}: "
            "not a save_to_disk folder or a datasets cache folder"
        )
    splits: dict[str | None, Split] = {}
    for name, entry in splits_info.items():
        entry = entry if isinstance(entry, dict) else {}
        prefixes = sorted(
            {str(p) for p in (entry.get("dataset_name"), info.get("dataset_name"), info.get("builder_name")) if p}
        )
        stem = "|".join(map(re.escape, prefixes)) or ".+"
        shape = re.compile(rf"(?:{stem})-{re.escape(name)}(?:-\d{{5}}-of-\d{{5}})?\.arrow\Z")
        files = tuple(sorted(n for n in top if shape.match(n)))
        if not files:
            raise ReaderError(f"{where}: {DATASET_INFO} lists split {name!r}, but no Arrow file of it is there")
        rows = entry.get("num_examples")
        splits[name] = Split(files=files, expected_rows=rows if isinstance(rows, int) else None)
    return Catalog("cache", DATASET_INFO, {None: splits}, None)


# -- hub-style Parquet repositories --------------------------------------------------------------------
def readme_configs(text: str, where: str) -> list[dict[str, Any]] | None:
    """The ``configs:`` list of a dataset card's YAML header, or None when it has none.

    Raises:
        ReaderError: the header is not valid YAML, or ``configs`` is not a list of mappings with
            a ``config_name``.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), None)
    if end is None:
        return None
    import yaml  # only for dataset cards with a YAML header

    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise ReaderError(f"{where}: the YAML header is not valid ({exc})") from None
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if configs is None:
        return None
    if not isinstance(configs, list) or not all(isinstance(c, dict) and "config_name" in c for c in configs):
        raise ReaderError(f"{where}: 'configs' must be a list of mappings with a config_name, got {configs!r:.200}")
    return configs


def _card_splits(entry: dict[str, Any], names: Sequence[str], where: str) -> dict[str | None, Split]:
    """The splits of one ``configs:`` entry, ``data_files`` read as ``datasets`` reads it."""
    base = str(entry.get("data_dir") or "").strip("/")
    files = entry.get("data_files")
    label = f"{where}: config {entry['config_name']!r}"

    def rx(pattern: Any) -> re.Pattern[str]:
        if not isinstance(pattern, str):
            raise ReaderError(f"{label}: a data_files path must be a string, got {pattern!r}")
        return glob_regex(f"{base}/{pattern}" if base else pattern)

    if files is None:  # only data_dir: the default patterns inside it
        inside = [n[len(base) + 1 :] for n in names if n.startswith(base + "/")] if base else list(names)
        inferred = _infer_splits(inside)
        return {s: Split(patterns=tuple(_prefixed(p, base) for p in ps), inferred=True) for s, ps in inferred.items()}
    if isinstance(files, str):
        return {"train": Split(patterns=(rx(files),))}
    if not isinstance(files, list):
        raise ReaderError(f"{label}: data_files must be a string or a list, got {files!r:.200}")
    if all(isinstance(f, str) for f in files):
        return {"train": Split(patterns=tuple(rx(f) for f in files))}
    out: dict[str, list[re.Pattern[str]]] = {}
    for item in files:
        if not (isinstance(item, dict) and isinstance(item.get("split"), str) and SPLIT_RE.match(item["split"])):
            raise ReaderError(
                f"{label}: each data_files entry needs a split (letters, digits, _ and .) and a path, got {item!r}"
            )
        paths = item.get("path")
        out.setdefault(item["split"], []).extend(rx(p) for p in (paths if isinstance(paths, list) else [paths]))
    return {s: Split(patterns=tuple(ps)) for s, ps in out.items()}


def _prefixed(pattern: re.Pattern[str], base: str) -> re.Pattern[str]:
    """``pattern`` (a regex over paths inside ``base``) as a regex over root-relative paths."""
    return re.compile(re.escape(base + "/") + pattern.pattern) if base else pattern


def _infer_splits(names: Sequence[str]) -> dict[str, list[re.Pattern[str]]]:
    """Split -> patterns from file names alone, as ``datasets`` does without a ``configs:`` section.

    First ``data/{split}-NNNNN-of-NNNNN*``, then split keywords in folder names, then in file
    names, then everything as ``train``. Only Parquet files count; no Parquet file: empty.
    """
    data = [n for n in names if _is_parquet(n) and not _ignored(n)]
    if not data:
        return {}
    sharded = sorted({m["split"] for n in data if (m := SHARDED.match(n))})
    if sharded:
        known = [s for s in ("train", "validation", "test") if s in sharded]
        order = known + [s for s in sharded if s not in known]
        return {s: [re.compile(rf"data/{re.escape(s)}-\d{{5}}-of-\d{{5}}[^/]*\Z")] for s in order}
    for table in DEFAULT_PATTERNS:
        found = {
            split: [glob_regex(p) for p in patterns]
            for split, patterns in table.items()
            if any(glob_regex(p).match(n) for p in patterns for n in data)
        }
        if found:
            return found
    return {}


def _config_dirs(names: Sequence[str]) -> dict[str | None, dict[str | None, Split]]:
    """``{config}/{split}-NNNNN-of-NNNNN.parquet`` or ``{config}/{split}/NNNN.parquet``, for every Parquet file.

    ``push_to_hub(config_name=...)`` and the hub's Parquet export lay configs out as folders; without
    the README that says so, ``datasets`` would merge them into one. Empty unless every file fits.
    """
    found: dict[str, dict[str, str]] = {}
    for n in (n for n in names if _is_parquet(n) and not _ignored(n)):
        m = CONFIG_SHARDED.match(n) or CONVERTED.match(n)
        if m is None or m["config"] == "data":
            return {}
        config, split = re.escape(m["config"]), re.escape(m["split"])
        shape = (
            rf"{config}/{split}-\d{{5}}-of-\d{{5}}[^/]*\.parquet\Z"
            if m.re is CONFIG_SHARDED
            else rf"{config}/{split}/\d+\.parquet\Z"
        )
        found.setdefault(m["config"], {})[m["split"]] = shape
    return {
        c: {s: Split(patterns=(re.compile(splits[s]),), inferred=True) for s in _split_order(splits)}
        for c, splits in sorted(found.items())
    }


def _split_order(splits: Sequence[str] | dict[str, Any]) -> list[str]:
    """train, validation, test first, then the others sorted: the order ``datasets`` lists splits in."""
    known = [s for s in ("train", "validation", "test") if s in splits]
    return known + sorted(s for s in splits if s not in known)


def _hub_catalog(names: Sequence[str], read: Read, where: str) -> Catalog:
    card = (
        readme_configs(read(README).decode("utf-8", errors="replace"), _join(where, README))
        if README in names
        else None
    )
    if card is not None:
        configs: dict[str | None, dict[str | None, Split]] = {}
        default = None
        for entry in card:
            name = str(entry["config_name"])
            configs[name] = _card_splits(entry, names, where)
            if entry.get("default"):
                default = name
        if default is None and (len(configs) == 1 or "default" in configs):
            default = next(iter(configs)) if len(configs) == 1 else "default"
        return Catalog("hub", f"{README} configs", configs, default)
    configs = _config_dirs(names)
    if configs:
        return Catalog("hub", "config folders", configs, next(iter(configs)) if len(configs) == 1 else None)
    inferred = _infer_splits(names)
    if not inferred:
        raise ReaderError(
            f"{where}: not a Hugging Face dataset folder: no {STATE} or {DATASET_DICT} (save_to_disk), and no "
            f"Parquet data files (hub layout: data/<split>-00000-of-00001.parquet, <config>/<split>-*.parquet or "
            f"{README} configs)"
        )
    splits = {s: Split(patterns=tuple(ps), inferred=True) for s, ps in inferred.items()}
    return Catalog("hub", "file names", {"default": dict(splits)}, "default")
