"""Moved to :mod:`zephon_core.checkpoint.replay` (next to the checkpoint format); old imports keep working."""
from zephon_core.checkpoint.replay import LaneStart, ReplayCursor, ResumePoint, lane_state

__all__ = ["LaneStart", "ReplayCursor", "ResumePoint", "lane_state"]
