"""Benchmarks, not tests: run them from the repository root (``python -m bench.<name>``)."""
