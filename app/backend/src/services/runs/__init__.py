"""Durable runs: one node execution from its request to its final status, across crashes.

* :mod:`~services.runs.request`: what an execution was asked to do (one request type, the
  repository optional), recorded on its row;
* :mod:`~services.runs.service`: the one entry point: record an execution, run it in place or
  through the repository path, finish it;
* :mod:`~services.runs.durable`: the repository path (lease, clone, resume, finalize);
* :mod:`~services.runs.loop`: the loop's inputs, built the same way for both, and one run of it;
* :mod:`~services.runs.results`: how every execution ends (cutover refusal, failed result,
  final status, the columns written);
* :mod:`~services.runs.leases`: one live owner per execution, fenced by an epoch;
* :mod:`~services.runs.checkpoints`: what a resumed execution restores;
* :mod:`~services.runs.claimed_changes`: what a run claims to have changed;
* :mod:`~services.runs.finalize`: commit, push and open the pull request exactly once;
* :mod:`~services.runs.reaper`: re-dispatch executions whose lease expired.

May import :mod:`services.repos`, :mod:`services.db`, :mod:`services.execution`,
:mod:`services.composition` and :mod:`services.settings`; never the worker, the API, the CLI or
the flowcharts (checked by import-linter's layers contract).
"""
