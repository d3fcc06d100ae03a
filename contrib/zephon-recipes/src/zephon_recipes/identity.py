"""A recipe as part of a run's identity: its data-changing form, recorded where the run is recorded.

A checkpoint must refuse to resume a run whose recipe was edited in a way that changes the data,
and must accept an edit that only changes performance (more workers, another runner, prefetch).
:mod:`zephon_recipes.diff` already knows which keys are which, so the identity of a recipe is the
recipe with every performance-only and metadata key removed (:func:`data_form`). The pipeline built
from a recipe carries it as the identity label ``recipe`` (``Pipeline.label``): it is in the
pipeline's definition, so in every checkpoint and its fingerprint, and a refused resume names the
recipe keys that differ (``labels.recipe.operators[1].shuffle.seed: 3 in checkpoint, 4 now``). With
a provenance manifest (zephon-observe), ``recipe.json`` beside its parts records the same form.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from zephon_recipes.diff import classify
from zephon_recipes.document import Key

RECIPE_LABEL = "recipe"
"""The identity label a recipe's pipeline carries (``definition()["labels"]["recipe"]``)."""

MANIFEST_FILE = "recipe.json"
"""The file written into a provenance manifest folder: the recipe's data-changing form and fingerprint."""


def _strip(value: Any, key: Key) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            here = (*key, k)
            if not classify(here):
                continue
            stripped = _strip(v, here)
            if stripped == {} and not (len(key) == 2 and key[0] == "operators"):
                continue  # an empty section (or one of performance keys only) is no section: same data
            out[k] = stripped
        return out
    if isinstance(value, list):
        return [_strip(v, (*key, i)) for i, v in enumerate(value)]
    return value


def data_form(data: dict[str, Any]) -> dict[str, Any]:
    """The recipe without the keys that never change the data (as :func:`zephon_recipes.diff.classify` says).

    Two recipes with the same data form give the same global batches; ``zephon diff`` reports
    every other difference as performance-only.
    """
    out = _strip(data, ())
    return out if isinstance(out, dict) else {}


def fingerprint(form: Any) -> str:
    """SHA-256 of the canonical JSON of a recipe's data form."""
    blob = json.dumps(form, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def record_in_manifest(folder: str | os.PathLike[str], form: dict[str, Any]) -> str:
    """Write ``recipe.json`` (the data form and its fingerprint) into a provenance manifest folder.

    The manifest's own parts say which samples each step held; this file says which recipe chose
    them. Returns the path written. Remote folders (``s3://...``) are written through fsspec.
    """
    path = os.fspath(folder)
    text = json.dumps({"recipe": form, "fingerprint": fingerprint(form)}, indent=2, sort_keys=True, default=str) + "\n"
    if "://" in path and not path.startswith("file://"):
        import fsspec

        target = path.rstrip("/") + "/" + MANIFEST_FILE
        with fsspec.open(target, "w") as f:
            f.write(text)
        return target
    local = path.removeprefix("file://")
    os.makedirs(local, exist_ok=True)
    target = os.path.join(local, MANIFEST_FILE)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)
    return target
