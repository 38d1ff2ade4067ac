"""Celery: dispatching and supervising node executions (the only package that imports celery).

* :mod:`~services.worker.celery_app` builds the Celery application from the settings;
* :mod:`~services.worker.tasks` holds the two explicitly named tasks, ``studio.execute_node`` and
  ``studio.reap``, each a few lines that validate a typed payload and hand off;
* :mod:`~services.worker.admission` decides whether a delivered task should run at all
  (idempotency, redelivery while a live lease is held);
* :mod:`~services.worker.child` runs ``studio execute <id>`` as a child process;
* :mod:`~services.worker.dispatch` is what ``studio run`` and the API call: send the task when a
  broker is configured, else run it in this process;
* :mod:`~services.worker.reaper_loop` re-dispatches executions whose lease expired, inside
  ``studio worker``.
"""
