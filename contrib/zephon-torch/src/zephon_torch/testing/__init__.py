"""Test helpers for code that trains with :class:`~zephon_torch.ZephonLoader` on real ranks.

* :mod:`zephon_torch.testing.ranks` — :func:`~zephon_torch.testing.ranks.launch` starts real gloo
  ranks as separate processes (as ``torchrun`` does, so a test can kill one and watch the others)
  and collects what each saw; :func:`~zephon_torch.testing.ranks.check_ok` fails with their stderr.
* :mod:`zephon_torch.testing.rank` — the rank process (``python -m zephon_torch.testing.rank``):
  iterate, hash every global batch, checkpoint and resume, as the launch parameters say.
* :mod:`zephon_torch.testing.text` — the reference text pipeline the package's own tests run
  (needs ``zephon-tokenize``, ``zephon-pack`` and ``zephon-core[testing]``: ``zephon-torch[test]``).

They live in the package rather than beside the tests so that rank processes can import them
without any path set-up.
"""

from __future__ import annotations
