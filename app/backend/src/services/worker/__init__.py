"""Celery: dispatching and supervising node executions (the only package that imports celery).

* :mod:`~services.worker.names` names the tasks and the broker (it imports nothing else of the
  worker);
* :mod:`~services.worker.celery_config` configures a Celery application from the settings, and
  :mod:`~services.worker.celery_app` registers the tasks on it;
* :mod:`~services.worker.tasks` holds the two explicitly named tasks, ``studio.execute_node`` and
  ``studio.reap``, each a few lines that validate a typed payload and hand off;
* :mod:`~services.worker.admission` decides whether a delivered task should run at all
  (idempotency, redelivery while a live lease is held);
* :mod:`~services.worker.child` runs ``studio execute <id>`` as a child process;
* :mod:`~services.worker.dispatch` is what ``studio run`` and the API (through the port the
  ``studio api`` command injects) call: send the task when a broker is configured, else run it
  in this process;
* :mod:`~services.worker.reaper_loop` re-dispatches executions whose lease expired, inside
  ``studio worker``.

May import every area below it (flowcharts, runs, repos, executors, db, execution, settings);
never the API or the CLI. The API does not import the worker: its dispatch functions are
injected by the CLI (:mod:`services.cli.api`).
"""
