"""Zephon's heavy test tooling, kept out of the kernel's wheel (``pip install 'zephon-testkit[s3]'``).

The kernel ships a light test kit, :mod:`zephon_core.testing` (the offline corpus, token documents
for packing operators, worker functions that fail), and zephon-storage the reader test kit,
``zephon_storage.testing`` (read-back checks and shared test classes for readers, also on S3). What needs a
server, a network client or new virtual environments lives here instead:

* :mod:`zephon_testkit.s3` — a real S3 API (moto's threaded server) on loopback, with a bucket and
  s3fs ``storage_options`` (the ``s3`` extra: moto, boto3, s3fs).
* :mod:`zephon_testkit.faultproxy` — :class:`~zephon_testkit.faultproxy.FaultProxy`, an HTTP/1.1
  proxy on loopback that drops, delays, stalls, truncates or answers ``503`` by a deterministic
  schedule, in front of any object-store emulator (standard library only).
* :mod:`zephon_testkit.isolated` — build a package of the repository and install it alone into a
  fresh virtual environment, then run a script there (:func:`~zephon_testkit.isolated.check_alone`).
* :mod:`zephon_testkit.shuffle_quality` — how mixed consecutive samples of a labelled dataset are
  (distinct labels per window, a chi-square test against the dataset's label frequencies), for
  the shuffle tests, the shuffle benchmark and users measuring their own data (NumPy only).

Importing this package imports nothing; ``faultproxy``, ``isolated`` and ``shuffle_quality`` need neither pytest nor moto.
"""

from __future__ import annotations

__version__ = "0.1.0"
