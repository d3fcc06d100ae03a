"""Test kit shared by the kernel, the plugins and third-party packages (``pip install 'zephon-core[testing]'``).

Plugins are separate distributions, so their tests cannot import the repository's ``tests`` folder;
what they share lives here, importable wherever the kernel is installed:

* :mod:`zephon_core.testing.corpus` — the offline English corpus (Shakespeare, else pydoc) every
  test and benchmark reads, and text mixtures built from it.
* :mod:`zephon_core.testing.cli` — :func:`~zephon_core.testing.cli.run_cli`, the ``zephon`` command
  line run in-process, for plugins that contribute commands.
* :mod:`zephon_core.testing.packing` — token documents and a checker for packing operators, now
  zephon-pack's (:mod:`zephon_pack.checking`), resolved there lazily.
* :mod:`zephon_core.testing.workers` — worker functions that fail, die or hang on one record, for
  runner tests.

This is the light kit: all a plugin author needs to test an operator. Readers are tested with the
reader kit of the storage toolkit they build on, ``zephon_storage.testing`` (read-back checks, the
shared fault classes, committed fixture datasets). What needs a server or fresh virtual
environments is a separate distribution, ``zephon-testkit`` (in ``contrib/``): S3 on loopback
(moto), the fault-injecting HTTP proxy, the install-alone helpers.

Importing this package imports nothing; ``corpus`` and ``cli`` need neither pytest nor hypothesis.
"""

from __future__ import annotations
