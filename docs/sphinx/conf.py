"""Sphinx configuration for the Studio backend docs (built warning-free in CI)."""

project = "Studio backend"
author = "Studio backend engineers"
extensions: list[str] = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
root_doc = "index"
