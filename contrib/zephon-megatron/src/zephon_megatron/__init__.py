"""Zephon for Megatron-Core: a data iterator per data-parallel rank whose checkpoint resumes on another dp size.

``ZephonMegatronData`` takes the data-parallel rank and group from ``megatron.core.parallel_state``,
yields one microbatch per ``next()`` (what Megatron's forward-backward schedules call), counts
``consumed_samples`` as Megatron does, and saves a global data position in Megatron's common
checkpoint state.
"""

from __future__ import annotations

from zephon_megatron.data import ZephonMegatronData, megatron_data_parallel

__version__ = "0.1.0"

__all__ = ["ZephonMegatronData", "megatron_data_parallel"]
