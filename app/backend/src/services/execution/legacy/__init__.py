"""The legacy runtime: the provider's own agent CLI, run confined in the workspace.

:mod:`.cli` is what every CLI adapter provides (argv, environment, a stream parser),
:mod:`.claude_code` the Claude Code adapter, :mod:`.process` the confined process (own process
group, killed as a group), :mod:`.runner` the harness around it: the CLI's stream normalized into
the journal, the guards, the :class:`~services.execution.outcomes.RunResult`.
"""
