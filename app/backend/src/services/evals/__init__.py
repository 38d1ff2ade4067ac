"""Evaluation (``studio eval``): suites and SWE-bench instances run as ordinary executions,
graded with hidden tests in the sandbox, summed up per matrix cell, compared and gated.

Above :mod:`services.runs` (each task is an execution created through
:class:`services.runs.service.ExecutionService`), below the CLI and the API, which inject how a
recorded execution is dispatched (the worker's dispatcher). Modules: :mod:`.suite` (the task
format and both loaders), :mod:`.fixtures` (the repository each task runs on), :mod:`.grader`,
:mod:`.runner` (the matrix at a set concurrency, resumable), :mod:`.stats` (Wilson intervals,
the exact McNemar test), :mod:`.reports` and :mod:`.compare` (the gate).
"""
