"""Operators: the accumulator/worker contract.

The built-in operators are a default plugin (:mod:`zephon_core.defaults.operators`); their 0.1.0
modules here (``zephon_core.ops.mapping`` and the others) only forward there.
"""
