"""Operators: the accumulator/worker contract and the kernel's built-in operators."""
