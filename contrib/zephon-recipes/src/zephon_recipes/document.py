"""Reading a recipe file into plain data, remembering where every key was written.

Validation must point at the file and line of a mistake, so reading keeps, next to the data, a map
from each key's path (``("mixture", "weights", "web")``, ``("operators", 1, "tokenize", "seed")``)
to the file and line that set it. YAML keeps the line in its parser's node marks; TOML's parser
does not, so the line of a TOML key is found by scanning the file's headers and ``key =`` lines.

A recipe may ``include`` base recipes (paths relative to the including file) and ``set`` dotted
keys; the command line's ``--set`` overrides come last. Mappings merge key by key; any other
value, a list included, replaces the base's.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zephon_core import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

Key = tuple[str | int, ...]
"""A path into the recipe's data: mapping keys and list indices."""

COMMAND_LINE = "--set"
"""The ``file`` of a location set on the command line."""


class RecipeError(ConfigError):
    """A recipe that cannot be read or does not validate; one line per problem, each naming file, line and key."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Loc:
    """Where a key was written: a file and a 1-based line (0 for a ``--set`` on the command line)."""

    file: str
    line: int

    def __str__(self) -> str:
        return self.file if self.line == 0 else f"{self.file}:{self.line}"


def dotted(key: Key) -> str:
    """``("operators", 1, "tokenize", "seed")`` as ``operators[1].tokenize.seed``."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass
class Document:
    """A recipe's merged data, the location of each key and the files it was read from (includes first)."""

    data: dict[str, Any]
    locs: dict[Key, Loc] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def loc(self, key: Key) -> Loc:
        """The location of ``key``, or of its nearest ancestor that has one (a key left at its default)."""
        for n in range(len(key), -1, -1):
            found = self.locs.get(key[:n])
            if found is not None:
                return found
        return Loc(self.files[-1] if self.files else "recipe", 0)

    def where(self, key: Key) -> str:
        """``file:line: key`` for messages."""
        return f"{self.loc(key)}: {dotted(key)}"


# -- YAML -------------------------------------------------------------------------------------------


def _read_yaml(path: Path) -> tuple[Any, dict[Key, Loc]]:
    import yaml

    text = path.read_text(encoding="utf-8")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise RecipeError([f"{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}"]) from None
    finally:
        loader.dispose()
    if node is None:
        return {}, {}
    locs: dict[Key, Loc] = {}
    file = str(path)

    def convert(n: yaml.Node, key: Key) -> Any:
        locs.setdefault(key, Loc(file, n.start_mark.line + 1))
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in n.value:
                name = loader.construct_object(k, deep=True)
                where = f"{file}:{k.start_mark.line + 1}"
                if not isinstance(name, str):
                    raise RecipeError([f"{where}: {dotted(key)}: keys must be strings, got {name!r}"])
                if name in out:
                    raise RecipeError([f"{where}: {dotted((*key, name))}: written twice"])
                here = (*key, name)
                locs[here] = Loc(file, k.start_mark.line + 1)
                out[name] = convert(v, (*key, name))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [convert(item, (*key, i)) for i, item in enumerate(n.value)]
        return loader.construct_object(n, deep=True)

    return convert(node, ()), locs


# -- TOML -------------------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\-\"']+)\s*=")


def _toml_parts(dotted_key: str) -> list[str]:
    return [p.strip().strip("\"'") for p in dotted_key.split(".")]


def _toml_lines(text: str, data: Mapping[str, Any], file: str) -> dict[Key, Loc]:
    """The line of every key of a TOML file, by scanning its headers and assignments.

    ``[a.b]`` opens a table; ``[[a]]`` a new element of the array of tables ``a`` (counted, so its
    keys are ``("a", i, ...)``); ``k = v`` and dotted ``k.j = v`` assign under the open table, and
    keys of an inline table ``k = {x = 1}`` on the same line are located on that line.
    """
    locs: dict[Key, Loc] = {}
    counts: dict[tuple[str, ...], int] = {}
    table: Key = ()

    def resolve(parts: list[str]) -> Key:
        """A header's parts, with the current index of each array of tables on the way."""
        out: list[str | int] = []
        for i, p in enumerate(parts):
            out.append(p)
            prefix = tuple(parts[: i + 1])
            if prefix in counts and i < len(parts) - 1:
                out.append(counts[prefix])
        return tuple(out)

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        head = _HEADER.match(line)
        if head and "=" not in head.group(2):
            parts = _toml_parts(head.group(2))
            if head.group(1) == "[[":
                prefix = tuple(parts)
                counts[prefix] = counts.get(prefix, -1) + 1
                table = (*resolve(parts), counts[prefix])
            else:
                table = resolve(parts)
            for n in range(1, len(table) + 1):
                locs.setdefault(table[:n], Loc(file, number))
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = (*table, *_toml_parts(assign.group(1)))
            for n in range(len(table) + 1, len(key) + 1):
                locs.setdefault(key[:n], Loc(file, number))
            rest = line[assign.end() :]
            for inner in _INLINE_KEY.finditer(rest):
                locs.setdefault((*key, inner.group(1).strip("\"'")), Loc(file, number))
    _index_inline_lists(data, (), locs)
    return locs


def _index_inline_lists(value: Any, key: Key, locs: dict[Key, Loc]) -> None:
    """Give the items of inline arrays (``operators = [{...}, {...}]``) their parent's line when unknown."""
    if isinstance(value, dict):
        for k, v in value.items():
            _index_inline_lists(v, (*key, k), locs)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if (*key, i) not in locs and key in locs:
                item = (*key, i)
                locs[item] = locs[key]
            _index_inline_lists(v, (*key, i), locs)


def _read_toml(path: Path) -> tuple[Any, dict[Key, Loc]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        where = f"{path}:{found.group(1)}" if found else str(path)
        raise RecipeError([f"{where}: not valid TOML: {exc}"]) from None
    return data, _toml_lines(text, data, str(path))


# -- includes and overrides -------------------------------------------------------------------------


def read_file(path: Path) -> tuple[Any, dict[Key, Loc]]:
    """The data and key locations of one file, by its suffix (``.yaml``/``.yml``, ``.toml``)."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise RecipeError([f"{path}: no such recipe file"])
    if suffix in (".yaml", ".yml"):
        return _read_yaml(path)
    if suffix == ".toml":
        return _read_toml(path)
    raise RecipeError([f"{path}: a recipe is a .yaml, .yml or .toml file"])


def _under(key: Key, prefix: Key) -> bool:
    return key[: len(prefix)] == prefix


def merge(base: dict[str, Any], base_locs: dict[Key, Loc], over: dict[str, Any], over_locs: dict[Key, Loc]) -> None:
    """Merge ``over`` into ``base`` in place: mappings key by key, anything else replaced whole."""

    def walk(b: dict[str, Any], o: Mapping[str, Any], key: Key) -> None:
        for k, v in o.items():
            here = (*key, k)
            if isinstance(v, dict) and isinstance(b.get(k), dict):
                if here in over_locs:
                    base_locs[here] = over_locs[here]
                walk(b[k], v, here)
                continue
            for stale in [p for p in base_locs if _under(p, here)]:
                del base_locs[stale]
            b[k] = v
            base_locs.update({p: loc for p, loc in over_locs.items() if _under(p, here)})

    walk(base, over, ())


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def split_key(text: str) -> list[str | int]:
    """``operators[1].tokenize.seed`` or ``operators.tokenize.seed`` as path segments."""
    parts: list[str | int] = []
    pos = 0
    for m in _SEGMENT.finditer(text):
        if text[pos : m.start()] not in ("", "."):
            break
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if pos != len(text) or not parts:
        raise ValueError(f"{text!r} is not a dotted key (e.g. mixture.weights.web or operators.tokenize.seed)")
    return parts


def _operator_name(entry: Any) -> str | None:
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    return None


def resolve_key(data: Any, parts: list[str | int]) -> Key:
    """The concrete path of a dotted key: a name segment inside a list picks the item that is that
    operator (``operators.tokenize``: the ``tokenize`` step; the first if there are several)."""
    out: list[str | int] = []
    node = data
    for part in parts:
        if isinstance(node, list):
            if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
                index = int(part)
                if not 0 <= index < len(node):
                    raise ValueError(f"index {index} is out of range ({len(node)} entries)")
            else:
                named = [i for i, e in enumerate(node) if _operator_name(e) == part]
                if not named:
                    listed = [n for e in node if (n := _operator_name(e)) is not None]
                    raise ValueError(f"no step {part!r} in the list (steps: {', '.join(listed) or 'none'})")
                index = named[0]
                out.append(index)
                node = node[index]
                out.append(part)
                node = node[part]
                continue
            out.append(index)
            node = node[index]
        else:
            out.append(part)
            node = node.get(part) if isinstance(node, dict) and isinstance(part, str) else None
    return tuple(out)


def assign(data: dict[str, Any], key: Key, value: Any) -> None:
    """Set ``key`` in ``data``, creating mappings on the way."""
    node: Any = data
    for part in key[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            node = node[part]
        if node is None or not isinstance(node, (dict, list)):
            raise ValueError("it goes through a value that is not a mapping or a list")
    if isinstance(node, list):
        node[int(key[-1])] = value
    else:
        node[key[-1]] = value


def parse_value(text: str) -> Any:
    """A ``--set`` value, read as a YAML scalar or flow value (``0.6``, ``true``, ``[1, 2]``), else the string."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_set(doc: Document, items: Mapping[str, Any], loc_of: Mapping[str, Loc]) -> None:
    """Apply dotted-key overrides (a file's ``set:`` or the command line's ``--set``) to ``doc``."""
    for text, value in items.items():
        loc = loc_of[text]
        try:
            key = resolve_key(doc.data, split_key(text))
            assign(doc.data, key, value)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise RecipeError([f"{loc}: set {text}: {exc}"]) from None
        for stale in [p for p in doc.locs if _under(p, key)]:
            del doc.locs[stale]
        doc.locs[key] = loc


def load_document(path: str | os.PathLike[str], overrides: Iterable[str] | Mapping[str, Any] = ()) -> Document:
    """Read ``path`` with its includes, its ``set:`` section and then ``overrides``.

    ``overrides`` are ``"dotted.key=value"`` strings (as ``--set`` gives them; the value is read as
    YAML) or a mapping of dotted keys to values.
    """
    doc = _load(Path(path), [])
    if isinstance(overrides, Mapping):
        items = dict(overrides)
    else:
        items = {}
        for item in overrides:
            text, sep, value = item.partition("=")
            if not sep or not text.strip():
                raise RecipeError([f"{COMMAND_LINE} {item}: expected KEY=VALUE, e.g. mixture.weights.web=0.6"])
            items[text.strip()] = parse_value(value)
    apply_set(doc, items, {k: Loc(f"{COMMAND_LINE} {k}", 0) for k in items})
    return doc


def _load(path: Path, stack: list[Path]) -> Document:
    real = path.resolve()
    if real in stack:
        chain = " -> ".join(str(p) for p in [*stack, real])
        raise RecipeError([f"{path}: include cycle: {chain}"])
    data, locs = read_file(path)
    if not isinstance(data, dict):
        raise RecipeError([f"{path}:1: a recipe is a mapping of sections (datasets, mixture, operators, ...)"])
    doc = Document({}, {}, [])
    includes = data.pop("include", [])
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise RecipeError([f"{locs.get(('include',), Loc(str(path), 1))}: include: a path or a list of paths"])
    for i, inc in enumerate(includes):
        target = path.parent / os.path.expandvars(inc)
        if not target.is_file():
            where = locs.get(("include", i)) or locs.get(("include",)) or Loc(str(path), 1)
            raise RecipeError([f"{where}: include: no such recipe file {str(target)!r}"])
        base = _load(target, [*stack, real])
        merge(doc.data, doc.locs, base.data, base.locs)
        doc.files += base.files
    sets = data.pop("set", {})
    if not isinstance(sets, dict):
        raise RecipeError([f"{locs.get(('set',), Loc(str(path), 1))}: set: a mapping of dotted keys to values"])
    own = {k: v for k, v in locs.items() if k[:1] not in (("include",), ("set",))}
    merge(doc.data, doc.locs, data, own)
    doc.files.append(str(path))
    apply_set(doc, sets, {k: locs.get(("set", k), Loc(str(path), 1)) for k in sets})
    return doc
