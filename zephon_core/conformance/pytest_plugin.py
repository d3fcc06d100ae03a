"""pytest plugin entry point of the conformance suite (options are added in a later change)."""
