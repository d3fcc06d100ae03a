"""Execution: runners, stages with reorder buffers, and the per-rank engine with its lane multiplexer."""
