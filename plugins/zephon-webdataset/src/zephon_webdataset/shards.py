"""Which tar files a WebDataset path names: a folder, one tar, a brace pattern or an explicit list.

WebDataset names its shards with brace patterns (``train-{000000..000099}.tar``), which are not
paths a file system can list. The pattern's folder becomes the dataset root and the pattern is
expanded here (no ``braceexpand`` dependency): ``{a..b}`` numeric ranges keep the zero padding of
their bounds, ``{x,y}`` alternatives, several groups multiply out in order.
"""

from __future__ import annotations

import re

from zephon_core import ConfigError

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$")


def expand(pattern: str) -> list[str]:
    """Every name a brace pattern stands for, in order (``a{0..2}`` -> ``a0, a1, a2``)."""
    start = pattern.find("{")
    if start < 0:
        if "}" in pattern:
            raise ConfigError(f"webdataset: unbalanced '}}' in {pattern!r}")
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[end], 0)
        if depth == 0:
            break
    else:
        raise ConfigError(f"webdataset: unbalanced '{{' in {pattern!r}")
    head, body, tail = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    m = _RANGE.match(body)
    if m:
        lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        width = max(len(m.group(1)), len(m.group(2))) if m.group(1).startswith("0") else 0
        sign = 1 if hi >= lo else -1
        options = [str(v).zfill(width) for v in range(lo, hi + sign, sign * step)]
    else:
        options = _split_top(body)
    return [x for opt in options for x in expand(head + opt + tail)]


def _split_top(body: str) -> list[str]:
    """``a,{b,c},d`` -> ``["a", "{b,c}", "d"]`` (commas inside nested braces stay)."""
    out, depth, cur = [], 0, []
    for ch in body:
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur.append(ch)
    out.append("".join(cur))
    return out


def split_pattern(path: str) -> tuple[str, list[str] | None]:
    """``root/train-{0..9}.tar`` -> ``("root", ["train-0.tar", …])``; a path without braces -> ``(path, None)``.

    Braces may appear in sub-folders below the root too (``root/{a,b}/x-{0..1}.tar``): the root is
    the folder before the first path part with a brace.
    """
    if "{" not in path:
        return path, None
    cut = path.rfind("/", 0, path.index("{"))
    if cut < 0:
        return ".", expand(path)
    root, rel = path[:cut] or "/", path[cut + 1 :]
    return root, expand(rel)
