"""``zephon index PATH [--checksum]`` for CSV folders: the kernel's manifest (sizes, row counts, checksums)."""

from __future__ import annotations

from {{ cookiecutter.package_name }}.reader import {{ cookiecutter.class_name }}


def build_index(path: str, *, checksum: bool = False) -> str:
    """Parse every file, write ``_zephon_manifest.json``; returns a one-line summary."""
    reader = {{ cookiecutter.class_name }}(path, manifest=False)
    where = reader.save_manifest(checksum=checksum)
    return f"{len(reader.files())} csv files, {sum(s.num_samples for s in reader.shards())} rows; {where}"
