"""Zephon's demos: the main text pipeline (:mod:`zephon_demo.text`) and the kernel-only one (:mod:`zephon_demo.kernel`)."""
