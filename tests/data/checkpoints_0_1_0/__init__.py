"""Checkpoints written by zephon-core 0.1.0, and the pipelines that wrote them (see ``builders``)."""
