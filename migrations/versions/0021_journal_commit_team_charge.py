"""PostgreSQL: the journal's commit carries a team's charge and answers the next checks' read.

``studio_journal_commit(json)`` (migration 0007) is replaced by one that returns ``json``
instead of the last sequence number: ``{"seq": <the last sequence number>, "alerts": [...],
"state": {...} | null}``. What it did stays as it was; two things join it, so that a step of a
loop needs no round trip besides its journal commits (issue 35):

* the ``team_charge`` operation (``services.db.team_budget.TeamCharge``): a model call's charge
  to its team's month, admitted under the budget or recorded as overflow, and the alert rows of
  the thresholds it crossed (``ON CONFLICT DO NOTHING``: whichever process crossed first owns
  the alert); the alerts it inserted are answered in ``alerts`` (the process logs them and hands
  them to the notifier). It was a transaction of its own per charged model call.
* ``read``: when the payload has ``read`` (``{"repository", "day", "month"}``), the state the
  loop's next checks read (``services.db.step_reads``: the cancel flag, the repository's day,
  the team's month and budget, the runtime settings) as of this commit, in ``state``.

Nothing changes on SQLite. The downgrade puts 0007's function back.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 19:20:00.000000
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = r"""
CREATE FUNCTION studio_journal_commit(p json) RETURNS json
LANGUAGE plpgsql AS $fn$
DECLARE
    eid text := p->>'execution_id';
    n integer := json_array_length(p->'events');
    last_seq integer;
    current_epoch integer;
    w json;
    next_seq integer;
    amount bigint;
    cancel boolean;
    budget bigint;
    spent bigint;
    overflow bigint;
    crossed integer;
    alerts json[] := '{}';
    team record;
    state json;
BEGIN
    UPDATE node_executions SET event_seq = event_seq + n WHERE id = eid
        RETURNING event_seq, lease_epoch, cancel_requested INTO last_seq, current_epoch, cancel;
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
        ELSIF w->>'op' = 'team_charge' THEN
            -- services.db.team_budget.TeamCharge: the team's month, and the thresholds this
            -- charge crossed (each alert once: whichever process inserts its row owns it)
            amount := (w->>'micros')::bigint;
            SELECT id, name, notify_url, round(monthly_budget_usd * 1000000)::bigint AS micros
                INTO team FROM teams WHERE id = w->>'team_id';
            budget := team.micros;
            INSERT INTO team_spend (team_id, month, spent_micros, overflow_micros, updated_at)
                VALUES (w->>'team_id', w->>'month', 0, 0, now())
                ON CONFLICT (team_id, month) DO NOTHING;
            UPDATE team_spend SET spent_micros = spent_micros + amount, updated_at = now()
                WHERE team_id = w->>'team_id' AND month = w->>'month'
                  AND spent_micros + amount <= coalesce(budget, (w->>'no_limit')::bigint)
                RETURNING spent_micros, overflow_micros INTO spent, overflow;
            IF NOT FOUND THEN
                UPDATE team_spend
                    SET overflow_micros = overflow_micros + amount, updated_at = now()
                    WHERE team_id = w->>'team_id' AND month = w->>'month'
                    RETURNING spent_micros, overflow_micros INTO spent, overflow;
            END IF;
            IF budget IS NOT NULL AND budget > 0 THEN
                FOR crossed IN SELECT value::text::integer
                                 FROM json_array_elements(w->'thresholds') LOOP
                    IF (spent + overflow - amount) * 100 < crossed * budget
                       AND crossed * budget <= (spent + overflow) * 100 THEN
                        INSERT INTO team_budget_alerts (team_id, month, threshold, spent_micros,
                                                        budget_micros, created_at, attempts)
                            VALUES (w->>'team_id', w->>'month', crossed, spent + overflow,
                                    budget, now(), 0)
                            ON CONFLICT (team_id, month, threshold) DO NOTHING;
                        IF FOUND THEN
                            alerts := alerts || json_build_object(
                                'ref', w->>'ref', 'team_id', team.id, 'team', team.name,
                                'notify_url', team.notify_url, 'month', w->>'month',
                                'threshold', crossed, 'spent_micros', spent + overflow,
                                'budget_micros', budget);
                        END IF;
                    END IF;
                END LOOP;
            END IF;
        ELSE
            RAISE EXCEPTION 'unknown journal operation %', w->>'op';
        END IF;
    END LOOP;
    IF p->'read' IS NOT NULL AND json_typeof(p->'read') = 'object' THEN
        -- services.db.step_reads: what the next checks read, as of this commit
        SELECT json_build_object(
            'cancel', cancel,
            'spent', (SELECT l.spent_micros FROM budget_ledger l
                      WHERE l.repository = p->'read'->>'repository'
                        AND l.day = (p->'read'->>'day')::date),
            'overflow', (SELECT l.overflow_micros FROM budget_ledger l
                         WHERE l.repository = p->'read'->>'repository'
                           AND l.day = (p->'read'->>'day')::date),
            'team_id', x.team_id,
            'team_spent', (SELECT s.spent_micros FROM team_spend s
                           WHERE s.team_id = x.team_id AND s.month = p->'read'->>'month'),
            'team_overflow', (SELECT s.overflow_micros FROM team_spend s
                              WHERE s.team_id = x.team_id
                                AND s.month = p->'read'->>'month'),
            'team_budget', (SELECT t.monthly_budget_usd FROM teams t WHERE t.id = x.team_id),
            'settings', (SELECT coalesce(json_object_agg(r.key, r.value), '{}'::json)
                         FROM runtime_settings r))
            INTO state FROM node_executions x WHERE x.id = eid;
    END IF;
    RETURN json_build_object('seq', last_seq, 'alerts', array_to_json(alerts),
                             'state', state);
END
$fn$
"""


def _function_of_0007() -> str:
    path = Path(__file__).with_name("0007_journal_commit_function.py")
    spec = importlib.util.spec_from_file_location("studio_migration_0007", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.FUNCTION)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS studio_journal_commit(json)")  # its type changes
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS studio_journal_commit(json)")
        op.execute(_function_of_0007())
