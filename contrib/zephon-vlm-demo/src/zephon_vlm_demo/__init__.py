"""Zephon's vision-language demo (see :mod:`zephon_vlm_demo.vlm`)."""
