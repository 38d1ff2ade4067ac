"""Repositories: where an execution's code comes from and where its changes go.

* :mod:`~services.repos.urls`: validation of repository URLs and what is derived from them;
* :mod:`~services.repos.hosts`: which network hosts a URL may reach;
* :mod:`~services.repos.origins`: where the GitHub integration's token may go;
* :mod:`~services.repos.access`: what an execution's repository may reach, with which credential;
* :mod:`~services.repos.credentials`: the token of the harness's own git operations;
* :mod:`~services.repos.mirrors`: the local cache of bare mirrors;
* :mod:`~services.repos.workspaces`: an ephemeral clone per execution;
* :mod:`~services.repos.pull_requests`: the pull-request port (GitHub through PyGithub).

May import :mod:`services.db`, :mod:`services.execution` and :mod:`services.settings`; never the
runs, the flowcharts, the worker, the API or the CLI (checked by import-linter's layers contract).
"""
