"""Zephon kernel and end-to-end tests (a package so spawned workers can import helpers)."""
