"""Data files the tests read (stored checkpoints of earlier releases and the code that made them)."""
