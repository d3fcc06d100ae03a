"""Reader test classes on S3 on loopback (moto's server, from ``zephon-testkit[s3]``).

:class:`S3ColumnarReaderFaults` is :class:`~zephon_storage.testing.readers.ColumnarReaderFaults`
plus one case on remote storage: an object that is not a readable file of the format, and one
deleted after listing, must each be a ``ReaderError`` naming its ``s3://`` URL. Needs ``pip install
'zephon-testkit[s3]'`` (moto's server, boto3, s3fs) in the reader's test environment; the case is
skipped without moto, and importing this module needs neither.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zephon_core import Dataset, ReaderError
from zephon_storage.testing.readers import ColumnarReaderFaults

Record = dict[str, Any]


class S3ColumnarReaderFaults(ColumnarReaderFaults):
    """:class:`~zephon_storage.testing.readers.ColumnarReaderFaults` plus an unreadable object on S3.

    Subclass it in a ``Test*`` class exactly as ``ColumnarReaderFaults`` (``dataset_format``,
    ``suffix``, ``label``, ``replaced`` and ``write``).
    """

    __test__ = False

    def test_unreadable_remote_object(self, tmp_path: Path, docs: list[Record]) -> None:
        pytest.importorskip("moto.server")
        from zephon_testkit.s3 import moto_s3

        bucket = f"{self.dataset_format}-bad"
        with moto_s3(bucket) as s3:
            s3.put(f"d/bad{self.suffix}", b"\0" * 1000)
            opts: dict[str, Any] = {"format": self.dataset_format, "storage_options": s3.storage_options}
            with pytest.raises(ReaderError, match=rf"s3://{bucket}/d/bad{re.escape(self.suffix)}: {self.unreadable}"):
                Dataset.from_path("x", s3.url("d"), **opts)
            local = tmp_path / f"ok{self.suffix}"
            self.write(local, docs[:100])
            s3.put(f"e/ok{self.suffix}", local.read_bytes())
            ds = Dataset.from_path("x", s3.url("e"), **opts)
            s3.client.delete_object(Bucket=s3.bucket, Key=f"e/ok{self.suffix}")
            with pytest.raises(ReaderError, match=rf"s3://{bucket}/e/ok{re.escape(self.suffix)}: not found"):
                ds.reader.read(0, np.array([1]))
