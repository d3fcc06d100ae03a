"""Default plugin (essential): the static mixture work source and the pieces work sources share.

* :mod:`.static_mixture` — :class:`~.static_mixture.StaticMixtureWorkSource`, what ``Pipeline(datasets)`` builds;
* :mod:`.mixture` — ``MixtureSpec`` and the deterministic round-robin schedules;
* :mod:`.shuffle`, :mod:`.permutation`, :mod:`.feistel` — the epoch orders (``shuffle_block_size``);
* :mod:`.exhaustion` — what a dataset does when it runs out (``exhaustion=``, ``passes=``);
* :mod:`.steering` — the lead gate that times a trainer's mixture changes.

A work source is an object handed to a pipeline, not a registry name, so this plugin registers no
entry: it is a plugin so that the manager lists the whole default set, and essential (blocking it
is refused) because the kernel builds this source itself.
"""

from __future__ import annotations

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's."""
