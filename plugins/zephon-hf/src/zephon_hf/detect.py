"""Whether a dataset folder is a Hugging Face dataset on disk, from file names alone.

Detection runs for every installed format on every ``Dataset.from_path`` without ``format=``, so it
reads nothing and imports neither pyarrow nor yaml. It claims:

* ``save_to_disk`` folders (``state.json`` or ``dataset_dict.json`` at the root) and ``datasets``
  builder caches (``dataset_info.json`` beside ``.arrow`` files);
* hub-style Parquet repositories named the way ``push_to_hub`` names files:
  ``data/<split>-00000-of-00002.parquet``, or ``<config>/<split>-00000-of-00001.parquet`` (and the
  hub's ``<config>/<split>/0000.parquet`` export) beside a ``README.md``.

A hub repository is also a folder of Parquet files, so with ``zephon-parquet`` installed (which this
package depends on) both formats claim it and ``Dataset.from_path`` asks for ``format=``. That is on
purpose: the plain Parquet reader would read every split at once (test rows in the training data);
``format="hf"`` reads one config and split.
"""

from __future__ import annotations

from typing import Any

from zephon_hf.layout import CONFIG_SHARDED, CONVERTED, README, SHARDED, is_arrow_root


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """The ``detect`` hook: True for a save_to_disk/cache folder or a hub-style Parquet layout."""
    if is_arrow_root(files):
        return True
    if any(SHARDED.match(f) for f in files):
        return True
    return README in files and any(CONFIG_SHARDED.match(f) or CONVERTED.match(f) for f in files)
