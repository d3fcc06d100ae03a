"""The reader test kit (``pip install 'zephon-storage[testing]'``): what a reader plugin's tests share.

* :mod:`zephon_storage.testing.conformance` — :class:`ReaderConformance`, the checks every reader must pass.
* :mod:`zephon_storage.testing.readers` — shards of the shared corpus, read-back checks, and the
  shared test classes every file-per-shard reader subclasses (:class:`CorpusConformance`,
  :class:`FileReaderFaults`, :class:`ColumnarReaderFaults`), cross-format hashing.
* :mod:`zephon_storage.testing.s3` — :class:`S3ColumnarReaderFaults`, the columnar faults plus an
  unreadable object on S3 (moto's server, from ``zephon-testkit[s3]``).
* :mod:`zephon_storage.testing.fixtures` — committed fixture datasets with an ``index.json``
  (conftest fixtures, :class:`FixtureConformance`, :class:`LayoutFaults`);
  :mod:`zephon_storage.testing.tagged` — the tagged-JSON encoding of their expected values (numpy
  only, also used by the fixture writers).

The shared test classes are not collected until subclassed by a ``Test*`` class. Importing this
package imports nothing; ``tagged`` needs neither pytest nor hypothesis.
"""

from __future__ import annotations
