"""The engine: tool domains, confinement, sandbox, the FrontierAgent loop and provider adapters.

Nothing in here imports the database, the worker, the API or the CLI (checked by import-linter).
"""
