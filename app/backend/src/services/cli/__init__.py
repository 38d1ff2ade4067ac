"""The ``studio`` command line: the composition root for local use."""
