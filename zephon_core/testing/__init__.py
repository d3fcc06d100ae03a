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
* :mod:`zephon_core.testing.workers` — worker functions that fail, die or hang on one record, for
  runner tests.

This is the light kit: all a plugin author needs to test an operator or a reader. What needs a
server or fresh virtual environments is a separate distribution, ``zephon-testkit`` (in
``contrib/``): S3 on loopback (moto), the fault-injecting HTTP proxy, the install-alone helpers.

The shared test classes are not collected until subclassed by a ``Test*`` class. Importing this
package imports nothing; ``corpus`` and ``tagged`` need neither pytest nor hypothesis.
"""

from __future__ import annotations
