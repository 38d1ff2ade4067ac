"""Studio backend: a multi-provider tool-loop execution engine for repository work."""

__version__ = "0.1.0"
