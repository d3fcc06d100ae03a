"""``zephon stubs``: editor and type-checker stubs of ``zephon_core`` that know the installed plugin operators.

The generator is :mod:`zephon_stubs.generate` (``pipeline_stub``, ``package_stub``, ``write_stubs``);
the command that wraps it is :mod:`zephon_stubs.command`, registered by :mod:`zephon_stubs.plugin`.
Importing this package imports neither.
"""

from __future__ import annotations

__version__ = "0.1.0"
