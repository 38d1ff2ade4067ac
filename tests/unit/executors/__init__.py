"""Unit tests of the execution substrates (no API server, no subprocess)."""
