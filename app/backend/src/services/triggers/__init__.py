"""Work that starts on GitHub: signed webhook deliveries, trigger rules, one slot per pull
request or issue, feedback comments.

An area above :mod:`services.runs` (it records executions through
:mod:`services.runs.request`, like the API) and below ``api | worker | cli``::

    POST /api/webhooks/github -> ingress (verify, record, enqueue)      services.triggers.ingress
      worker: process the delivery (who may, fork?, the slot)           services.triggers.processing
        slot: idle -> running | running/debouncing + pending            services.triggers.slots
          execution (the durable path, services.runs)                   services.triggers.starting
      reaper pass: release final slots, start due pending work,
        replay deferred deliveries, end comments                        services.triggers.settle

The public entry point for other kinds of work on a pull request (reviews):
:func:`services.triggers.slots.start_work`.
"""
