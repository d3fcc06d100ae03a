"""Test kit shared by the kernel, the plugins and third-party packages (``pip install 'zephon-core[testing]'``).

Plugins are separate distributions, so their tests cannot import the repository's ``tests`` folder;
what they share lives here, importable wherever the kernel is installed:

* :mod:`zephon_core.testing.corpus` — the offline English corpus (Shakespeare, else pydoc) every
  test and benchmark reads, and text mixtures built from it.
* :mod:`zephon_core.testing.readers` — read-back checks for readers, and shared test classes:
  :class:`~zephon_core.testing.readers.CorpusConformance`,
  :class:`~zephon_core.testing.readers.FileReaderFaults`,
  :class:`~zephon_core.testing.readers.ColumnarReaderFaults`; and cross-format hashing
  (:func:`~zephon_core.testing.readers.cross_format_hashes`, :func:`~zephon_core.testing.readers.plain_parquet`).
* :mod:`zephon_core.testing.fixtures` — committed fixture datasets with an ``index.json``
  (conftest fixtures, :class:`~zephon_core.testing.fixtures.FixtureConformance`,
  :class:`~zephon_core.testing.fixtures.LayoutFaults`); :mod:`zephon_core.testing.tagged` — the
  tagged-JSON encoding of their expected values (numpy only, also used by the fixture writers).
* :mod:`zephon_core.testing.packing` — token documents and a checker for packing operators.
* :mod:`zephon_core.testing.s3` — a real S3 API (moto) on loopback.
* :mod:`zephon_core.testing.isolated` — install one package alone into a fresh virtual environment.

The shared test classes are not collected until subclassed by a ``Test*`` class. Importing this
package imports nothing; ``corpus``, ``tagged`` and ``isolated`` need neither pytest nor hypothesis.
"""

from __future__ import annotations
