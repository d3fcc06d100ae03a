"""Vortex reader plugin for Zephon (``format="vortex"``).

Importing this package does not import ``vortex`` (distribution ``vortex-data``); the reader lives
in :mod:`zephon_vortex.reader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
