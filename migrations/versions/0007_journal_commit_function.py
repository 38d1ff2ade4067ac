"""PostgreSQL: the journal's commit as one function call, one round trip.

``studio_journal_commit(json)`` does in the server what ``DbEventSink`` does statement by
statement on SQLite (``services.db.journal_pg``): bump the execution's sequence counter (checking
the lease epoch), store the blobs, insert the events, then apply the tool-call evidence, the
checkpoint (deleting the attempt's older ones) and the budget charges. Called in autocommit mode,
the call is its own transaction: one round trip per commit. An unknown execution raises SQLSTATE
``SX001``, a stale lease epoch ``SX002`` (the current epoch in the detail); either way nothing is
written. Nothing changes on SQLite.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 00:50:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = r"""
CREATE OR REPLACE FUNCTION studio_journal_commit(p json) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    eid text := p->>'execution_id';
    n integer := json_array_length(p->'events');
    last_seq integer;
    current_epoch integer;
    w json;
    next_seq integer;
    amount bigint;
BEGIN
    UPDATE node_executions SET event_seq = event_seq + n WHERE id = eid
        RETURNING event_seq, lease_epoch INTO last_seq, current_epoch;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown execution %', eid USING ERRCODE = 'SX001';
    END IF;
    IF p->>'epoch' IS NOT NULL AND current_epoch IS DISTINCT FROM (p->>'epoch')::integer THEN
        RAISE EXCEPTION 'stale lease epoch %', p->>'epoch'
            USING ERRCODE = 'SX002', DETAIL = current_epoch::text;
    END IF;
    INSERT INTO content_blobs (execution_id, digest, size_bytes, data)
        SELECT eid, b->>'digest', (b->>'size')::integer, decode(b->>'data', 'base64')
        FROM json_array_elements(p->'blobs') AS b
        ON CONFLICT (execution_id, digest) DO NOTHING;
    INSERT INTO execution_events (execution_id, seq, kind, cycle, data, created_at)
        SELECT eid, last_seq - n + e.ord::integer, e.value->>'kind',
               (e.value->>'cycle')::integer, e.value->'data', now()
        FROM json_array_elements(p->'events') WITH ORDINALITY AS e(value, ord);
    FOR w IN SELECT value FROM json_array_elements(p->'ops') LOOP
        IF w->>'op' = 'evidence' THEN
            INSERT INTO tool_calls AS t (
                execution_id, call_id, tool_name, domain, operation, cycle, provider, args,
                envelope, ok, error_code, duration_ms, request_id, correlation_id, created_at,
                finished_at)
            VALUES (
                eid, w->>'call_id', w->>'tool_name', w->>'domain', w->>'operation',
                (w->>'cycle')::integer, w->>'provider', w->'args', w->'envelope',
                (w->>'ok')::boolean, w->>'error_code', (w->>'duration_ms')::double precision,
                w->>'request_id', w->>'correlation_id', now(),
                CASE WHEN w->'envelope' IS NULL THEN NULL ELSE now() END)
            ON CONFLICT (execution_id, call_id) DO UPDATE SET
                args = COALESCE(t.args, EXCLUDED.args),
                tool_name = CASE WHEN t.tool_name = '' THEN EXCLUDED.tool_name
                                 ELSE t.tool_name END,
                domain = CASE WHEN t.tool_name = '' THEN EXCLUDED.domain ELSE t.domain END,
                operation = CASE WHEN t.tool_name = '' THEN EXCLUDED.operation
                                 ELSE t.operation END,
                cycle = COALESCE(t.cycle, EXCLUDED.cycle),
                provider = COALESCE(NULLIF(t.provider, ''), EXCLUDED.provider),
                envelope = COALESCE(t.envelope, EXCLUDED.envelope),
                ok = CASE WHEN t.envelope IS NULL THEN EXCLUDED.ok ELSE t.ok END,
                error_code = CASE WHEN t.envelope IS NULL THEN EXCLUDED.error_code
                                  ELSE t.error_code END,
                duration_ms = CASE WHEN t.envelope IS NULL THEN EXCLUDED.duration_ms
                                   ELSE t.duration_ms END,
                request_id = CASE WHEN t.envelope IS NULL THEN EXCLUDED.request_id
                                  ELSE t.request_id END,
                correlation_id = CASE WHEN t.envelope IS NULL THEN EXCLUDED.correlation_id
                                      ELSE t.correlation_id END,
                finished_at = CASE WHEN t.envelope IS NULL THEN EXCLUDED.finished_at
                                   ELSE t.finished_at END;
        ELSIF w->>'op' = 'checkpoint' THEN
            SELECT coalesce(max(seq), 0) + 1 INTO next_seq
                FROM workspace_checkpoints WHERE execution_id = eid;
            INSERT INTO workspace_checkpoints (
                execution_id, seq, call_id, base_commit, available, size_bytes, sha256, patch,
                lease_epoch, owner, created_at)
            VALUES (
                eid, next_seq, w->>'call_id', w->>'base_commit', (w->>'available')::boolean,
                (w->>'size_bytes')::integer, w->>'sha256', decode(w->>'patch', 'base64'),
                (w->>'epoch')::integer, w->>'owner', now());
            IF (w->>'available')::boolean THEN
                DELETE FROM workspace_checkpoints
                    WHERE execution_id = eid AND seq < next_seq
                      AND lease_epoch IS NOT DISTINCT FROM (w->>'epoch')::integer;
            END IF;
        ELSIF w->>'op' = 'charge' THEN
            amount := (w->>'micros')::bigint;
            INSERT INTO budget_ledger (repository, day, spent_micros, overflow_micros,
                                       updated_at)
                VALUES (w->>'repository', (w->>'day')::date, 0, 0, now())
                ON CONFLICT (repository, day) DO NOTHING;
            UPDATE budget_ledger SET spent_micros = spent_micros + amount, updated_at = now()
                WHERE repository = w->>'repository' AND day = (w->>'day')::date
                  AND spent_micros + amount <= (w->>'limit')::bigint;
            IF NOT FOUND THEN
                UPDATE budget_ledger
                    SET overflow_micros = overflow_micros + amount, updated_at = now()
                    WHERE repository = w->>'repository' AND day = (w->>'day')::date;
            END IF;
        ELSE
            RAISE EXCEPTION 'unknown journal operation %', w->>'op';
        END IF;
    END LOOP;
    RETURN last_seq;
END
$fn$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS studio_journal_commit(json)")
