"""Observability for Zephon: the provenance manifest (:mod:`zephon_observe.manifest`), ``zephon profile``
(:mod:`zephon_observe.profile`), metrics export (:mod:`zephon_observe.export`), run-time validation
(:mod:`zephon_observe.validation`) and the autotuner (:mod:`zephon_observe.autotune`).

Kept out of the kernel so that a pipeline that observes nothing installs and imports none of it; it
plugs in through the kernel's ``zephon_register_observers`` and ``zephon_register_commands`` hooks
(:mod:`zephon_observe.plugin`).
"""

__version__ = "0.1.0"
