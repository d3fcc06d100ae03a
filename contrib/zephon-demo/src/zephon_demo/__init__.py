"""Zephon's main demo (see :mod:`zephon_demo.text`)."""
