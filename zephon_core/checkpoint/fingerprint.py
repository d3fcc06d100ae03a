"""What a checkpoint belongs to: the fingerprint of a pipeline definition, and how two definitions differ.

A checkpoint resumes only the pipeline whose definition (everything that determines the data) hashes
to its fingerprint; when it does not, the differences are named so the user sees what changed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def fingerprint(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a pipeline definition."""
    blob = json.dumps(definition, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def diff_definitions(old: Any, new: Any, path: str = "") -> list[str]:
    """Human-readable differences between two definitions, e.g. ``operators[2].config.seed: 7 != 8``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append(f"{p}: not in checkpoint, now {new[k]!r}")
            elif k not in new:
                out.append(f"{p}: {old[k]!r} in checkpoint, missing now")
            else:
                out.extend(diff_definitions(old[k], new[k], p))
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} entries in checkpoint, {len(new)} now"]
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in diff_definitions(a, b, f"{path}[{i}]")]
    return [] if old == new else [f"{path}: {old!r} in checkpoint, {new!r} now"]
