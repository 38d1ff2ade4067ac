"""``studio.execute_node`` without a broker: the Celery wiring, the typed payload, idempotency,
and a redelivery for an execution that holds a live lease (ignored, not failed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import SecretStr
from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.session import Database
from services.executors.base import SubstrateStatus
from services.settings import StudioSettings
from services.worker.admission import Admission
from services.worker.celery_app import build_celery
from services.worker.dispatch import dispatch_execution
from services.worker.handlers import handle_execute_node
from services.worker.names import TASK_EXECUTE_NODE, TASK_REAP
from services.worker.payloads import ExecuteNodePayload, InvalidPayload, parse
from tests.support.redaction import settings_redactor


class Launches:
    """Stands in for the ``studio execute`` child: records which executions were started."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def __call__(self, execution_id: str) -> SubstrateStatus:
        self.started.append(execution_id)
        return SubstrateStatus.SUCCEEDED


def _execution(db: Database) -> str:
    return ExecutionRepository(db, settings_redactor()).create(provider="replay", model="replay",
                                                               prompt="p")


def _payload(execution_id: str) -> ExecuteNodePayload:
    return parse(ExecuteNodePayload, {"execution_id": execution_id})


def test_the_app_is_configured_for_at_least_once_delivery(worker_settings: StudioSettings) -> None:
    app = build_celery(worker_settings)
    conf = app.conf
    assert (conf.task_acks_late, conf.task_reject_on_worker_lost,
            conf.worker_prefetch_multiplier) == (True, True, 1)
    assert conf.task_always_eager is True  # no broker: the embedded default
    assert conf.task_default_queue == "studio"
    assert {TASK_EXECUTE_NODE, TASK_REAP} <= set(app.tasks)
    assert app.tasks[TASK_EXECUTE_NODE].acks_late is True


def test_a_broker_turns_eager_mode_off(worker_settings: StudioSettings) -> None:
    settings = worker_settings.model_copy(update={"broker_url": SecretStr("redis://127.0.0.1:6379/9"),
                                                  "worker_queue": "q-test"})
    conf = build_celery(settings).conf
    assert conf.task_always_eager is False
    assert conf.task_default_queue == "q-test"


def test_a_malformed_message_fails_the_task_before_anything_runs(
        worker_settings: StudioSettings) -> None:
    task = build_celery(worker_settings).tasks[TASK_EXECUTE_NODE]
    with pytest.raises(InvalidPayload, match="valid UUID"):
        task.apply(kwargs={"execution_id": "not-an-id"})
    with pytest.raises(InvalidPayload, match="Extra inputs"):
        task.apply(kwargs={"execution_id": "0b9a3c43-4b43-4a43-9c44-1f2e3d4c5b6a", "x": 1})


def test_a_redelivery_while_a_live_lease_is_held_is_ignored(
        worker_settings: StudioSettings, worker_db: Database) -> None:
    execution_id = _execution(worker_db)
    assert LeaseStore(worker_db).claim(execution_id, "host:1:abc", ttl_s=300) == 1
    launches = Launches()
    decision = handle_execute_node(_payload(execution_id), worker_settings, launch=launches)
    assert decision is Admission.LEASE_HELD
    assert launches.started == []
    # Through the Celery task: a success (acknowledged), not a failure or a retry.
    result = build_celery(worker_settings).tasks[TASK_EXECUTE_NODE].apply(
        kwargs={"execution_id": execution_id})
    assert (result.state, result.result) == ("SUCCESS", "lease_held")
    row = ExecutionRepository(worker_db).get(execution_id)
    assert row is not None and (row.status, row.lease_epoch) == ("claimed", 1)


def test_an_expired_lease_is_taken_over(worker_settings: StudioSettings,
                                        worker_db: Database) -> None:
    execution_id = _execution(worker_db)
    LeaseStore(worker_db).claim(execution_id, "host:1:abc", ttl_s=300)
    with worker_db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                        .values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    launches = Launches()
    assert handle_execute_node(_payload(execution_id), worker_settings,
                               launch=launches) is Admission.RUN
    assert launches.started == [execution_id]


def test_a_finished_execution_is_a_no_op(worker_settings: StudioSettings,
                                          worker_db: Database) -> None:
    execution_id = _execution(worker_db)
    ExecutionRepository(worker_db, settings_redactor()).finish(execution_id, status="succeeded",
                                                               outcome="finished")
    launches = Launches()
    for _ in range(2):
        assert handle_execute_node(_payload(execution_id), worker_settings,
                                   launch=launches) is Admission.FINISHED
    assert launches.started == []


def test_an_unknown_execution_is_a_no_op(worker_settings: StudioSettings,
                                          worker_db: Database) -> None:
    launches = Launches()
    decision = handle_execute_node(_payload("0b9a3c43-4b43-4a43-9c44-1f2e3d4c5b6a"),
                                   worker_settings, launch=launches)
    assert decision is Admission.UNKNOWN
    assert launches.started == []


def test_without_a_broker_dispatch_runs_in_this_process(worker_settings: StudioSettings,
                                                          worker_db: Database) -> None:
    execution_id = _execution(worker_db)
    ExecutionRepository(worker_db, settings_redactor()).finish(execution_id, status="failed",
                                                               outcome="error")
    assert dispatch_execution(execution_id, worker_settings) is Admission.FINISHED
    with pytest.raises(InvalidPayload):
        dispatch_execution("nope", worker_settings)
