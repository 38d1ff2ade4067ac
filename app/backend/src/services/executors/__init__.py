"""Execution substrates: where ``studio execute <execution_id>`` runs.

* :mod:`services.executors.local`: a subprocess of this process (the embedded default);
* :mod:`services.executors.kubernetes`: a batch/v1 Job per execution, whose manifest is built by
  the pure function in :mod:`services.executors.pod_manifest`.

Only this package imports the ``kubernetes`` client, and only in those two modules: importing
``services.executors`` itself stays cheap.
"""

from services.executors.base import Handle, Substrate, SubstrateStatus

__all__ = ["Handle", "Substrate", "SubstrateStatus"]
