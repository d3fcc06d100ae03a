"""The determinism conformance suite (see docs/writing-an-operator.md)."""
