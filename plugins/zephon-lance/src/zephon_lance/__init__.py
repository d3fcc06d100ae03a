"""Lance reader plugin for Zephon (``format="lance"``).

Importing this package does not import ``lance`` (distribution ``pylance``); the reader lives in
:mod:`zephon_lance.reader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
