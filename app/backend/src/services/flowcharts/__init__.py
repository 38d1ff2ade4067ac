"""Flowcharts: graphs of agent, command and decision nodes, and their runs.

* :mod:`~services.flowcharts.graph`: the pure graph model, node configs and validation;
* :mod:`~services.flowcharts.templates`: prompt and argument templates (jinja2's sandbox);
* :mod:`~services.flowcharts.traversal`: which nodes run next, where a decision goes;
* :mod:`~services.flowcharts.workspace`: the directory a run creates and owns;
* :mod:`~services.flowcharts.nodes`: running one work node as a node execution;
* :mod:`~services.flowcharts.service`: start a flowchart run, advance it, cancel it.

The top of the application layers: may import :mod:`services.runs`, :mod:`services.repos`,
:mod:`services.db`, :mod:`services.execution`, :mod:`services.composition` and
:mod:`services.settings`; only the worker, the API and the CLI import it.
"""
