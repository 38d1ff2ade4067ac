"""Runtime settings: what operators change while the system runs, stored as JSON in the database.

Every read goes to the database (no cache), so a change applies at the next check of every
running execution. Known keys, their types and defaults are in :data:`RUNTIME_SETTINGS`; unknown
keys are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Table, select

from services.db.errors import NotFound
from services.db.models import RuntimeSetting
from services.db.session import Database

_TABLE: Table = RuntimeSetting.__table__  # type: ignore[assignment]
_ALL = select(_TABLE.c.key, _TABLE.c.value)

NODE_CUTOVER_OVERRIDE = "__agent_runtime_cutover_enabled"
NODE_OVERRIDES_ALLOWED = "node_overrides_allowed"
# node config keys that override an operator's runtime setting: the key, the setting it overrides
OPERATOR_OVERRIDES: dict[str, str] = {NODE_CUTOVER_OVERRIDE: "agent_runtime_cutover_enabled"}
CutoverSource = Literal["node_override", "runtime_setting", "default"]


@dataclass(frozen=True)
class SettingSpec:
    """A runtime setting: its type, default and help; a number's bounds (``minimum``: inclusive,
    unless ``above`` makes it exclusive; ``maximum``: inclusive) and unit."""

    key: str
    type: type[Any]
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    unit: str = ""

    def bounds(self) -> dict[str, Any]:
        """The bounds as the API describes them (empty for a bool)."""
        if self.type is bool:
            return {}
        return {"minimum": self.minimum, "maximum": self.maximum,
                "exclusive_minimum": self.above, "unit": self.unit}


_SPECS = (
    SettingSpec("agent_runtime_cutover_enabled", bool, True,
                "Run agent nodes on the SDK tool loop (false: legacy runtime)."),
    SettingSpec(NODE_OVERRIDES_ALLOWED, bool, False,
                "Let a 'run' token store and start flowcharts whose nodes override operator "
                "settings (__agent_runtime_cutover_enabled); false: only 'admin' may."),
    SettingSpec("approval_self_allowed", bool, False,
                "Let the token that created an execution decide its own gated calls (for "
                "single-person teams); false: someone else with the 'approve' scope decides."),
    SettingSpec("team_concurrency_limit", int, 0,
                "Executions one team may run at once (claimed, running, finalizing); more stay "
                "queued (waiting_reason team_concurrency). 0: no limit.",
                minimum=0, maximum=100_000, unit="executions"),
    SettingSpec("killswitch_engaged", bool, False,
                "Stop every execution before its next model or tool call."),
    SettingSpec("max_iterations", int, 24, "Default model-call cap per execution.",
                minimum=1, maximum=10_000, unit="model calls"),
    SettingSpec("max_budget_usd", float, 2.0, "Default spending cap per execution (USD).",
                minimum=0, maximum=10_000, above=True, unit="USD"),
    SettingSpec("repo_daily_budget_usd", float, 20.0,
                "Spending cap per repository and UTC day (USD).",
                minimum=0, maximum=1_000_000, unit="USD"),
    SettingSpec("wall_clock_s", float, 3600.0, "Default wall-clock limit per execution (s).",
                minimum=0, maximum=7 * 86_400, above=True, unit="s"),
    SettingSpec("stall_s", float, 600.0, "Default inactivity limit per execution (s).",
                minimum=0, maximum=86_400, above=True, unit="s"),
    SettingSpec("context_token_budget", int, 120_000,
                "With compaction off only: conversation size (estimated tokens) above which the "
                "oldest tool output is elided, one per turn.",
                minimum=1_000, maximum=10_000_000, unit="tokens"),
    SettingSpec("compaction_enabled", bool, True,
                "Compact long conversations with hysteresis at the model's context window "
                "(false: elide one old output per turn above context_token_budget)."),
    SettingSpec("context_window_tokens", int, 0,
                "Context window for every model, replacing each model's own (0: the model's).",
                minimum=0, maximum=10_000_000, unit="tokens"),
    SettingSpec("context_high_mark", float, 0.8,
                "Compact when the next request passes this fraction of the window.",
                minimum=0, maximum=1, above=True, unit="fraction"),
    SettingSpec("context_low_mark", float, 0.5,
                "Compact down to this fraction of the window.",
                minimum=0, maximum=1, above=True, unit="fraction"),
    SettingSpec("context_keep_turns", int, 4,
                "Recent turns whose tool outputs compaction keeps whole.",
                minimum=1, maximum=1_000, unit="turns"),
    SettingSpec("lease_ttl_s", float, 60.0,
                "How long an execution's lease lasts without a heartbeat (s).",
                minimum=0, maximum=86_400, above=True, unit="s"),
    SettingSpec("heartbeat_s", float, 15.0, "How often a running execution renews its lease (s).",
                minimum=0, maximum=3_600, above=True, unit="s"),
    SettingSpec("reaper_interval_s", float, 30.0,
                "How often the reaper looks for executions whose lease expired (s).",
                minimum=0, maximum=86_400, above=True, unit="s"),
    SettingSpec("queued_timeout_s", float, 60.0,
                "How long a dispatched execution may stay queued, never claimed, before the "
                "reaper dispatches it again (s).",
                minimum=0, maximum=86_400, above=True, unit="s"),
    SettingSpec("trigger_debounce_s", float, 15.0,
                "How long work that arrives for a pull request or issue whose run is under way "
                "waits (and gathers more comments) before its follow-up starts (s).",
                minimum=0, maximum=86_400, unit="s"),
    SettingSpec("max_attempts", int, 5,
                "Attempts (lease claims) an execution gets before the reaper gives up on it.",
                minimum=1, maximum=1_000, unit="attempts"),
    SettingSpec("retry_base_s", float, 30.0,
                "Backoff before the first retry of an execution ended by an infrastructure "
                "error (s); each next one is retry_factor times longer, with jitter.",
                minimum=0, maximum=86_400, above=True, unit="s"),
    SettingSpec("retry_factor", float, 2.0, "Growth of the retry backoff per attempt.",
                minimum=1, maximum=100, unit="x"),
    SettingSpec("retry_max_delay_s", float, 900.0,
                "Longest backoff before a retry, Retry-After included (s).",
                minimum=0, maximum=7 * 86_400, above=True, unit="s"),
    SettingSpec("retry_max_attempts", int, 5,
                "Attempts an execution gets against infrastructure errors before it is "
                "dead-lettered (1: never retried).",
                minimum=1, maximum=100, unit="attempts"),
)
RUNTIME_SETTINGS: dict[str, SettingSpec] = {spec.key: spec for spec in _SPECS}
LIMIT_KEYS = ("max_iterations", "max_budget_usd", "repo_daily_budget_usd", "wall_clock_s",
              "stall_s", "context_token_budget", "compaction_enabled", "context_window_tokens",
              "context_high_mark", "context_low_mark", "context_keep_turns")


class UnknownSetting(NotFound, KeyError):
    """No runtime setting has this key (a ``KeyError`` too, as a mapping lookup)."""

    what = "runtime setting"

    def __init__(self, key: str) -> None:
        super().__init__(key, known=sorted(RUNTIME_SETTINGS))

    def __str__(self) -> str:
        return (f"unknown setting {self.ident!r}; known settings: "
                f"{', '.join(sorted(RUNTIME_SETTINGS))}")


class InvalidSettingValue(ValueError):
    """A value of the wrong type, or out of the setting's bounds (``details``: what the API
    answers with its 422: the field, and the bound it broke)."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


def _spec(key: str) -> SettingSpec:
    try:
        return RUNTIME_SETTINGS[key]
    except KeyError:
        raise UnknownSetting(key) from None


def validate(key: str, value: Any, *, exact: bool = False) -> Any:
    """``value`` converted to the type of ``key`` (strict: ``"yes"`` is not a bool; a number
    may be given as a string unless ``exact``: then only an int or a float (for a float
    setting) is one, never a bool or a string)."""
    spec = _spec(key)
    try:
        return _adapter(spec.type).validate_python(
            value, strict=exact or spec.type is not float)
    except ValidationError as exc:
        raise InvalidSettingValue(
            f"{key} expects a {spec.type.__name__}, got {value!r:.80}",
            {"field": key, "expected": _TYPE_NAMES[spec.type]},
        ) from exc


_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number"}


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    """The validator of a setting's type, built once (a loop validates its limit overrides
    before every model call; building a ``TypeAdapter`` costs more than the validation)."""
    found = _ADAPTERS.get(kind)
    if found is None:
        found = _ADAPTERS[kind] = TypeAdapter(kind)
    return found


def _bound(spec: SettingSpec, number: float) -> tuple[str, float] | None:
    """The bound ``number`` breaks, if any: ``("minimum"|"exclusive_minimum"|"maximum", b)``."""
    if not math.isfinite(number):
        return ("maximum", spec.maximum) if spec.maximum is not None else None
    if spec.minimum is not None:
        if spec.above and number <= spec.minimum:
            return "exclusive_minimum", spec.minimum
        if not spec.above and number < spec.minimum:
            return "minimum", spec.minimum
    if spec.maximum is not None and number > spec.maximum:
        return "maximum", spec.maximum
    return None


def checked(key: str, value: Any) -> Any:
    """As :func:`validate`, and within the setting's bounds (what an operator may store)."""
    spec = _spec(key)
    value = validate(key, value, exact=True)
    if spec.type is bool:
        return value
    broken = _bound(spec, float(value))
    if broken is None:
        return value
    kind, bound = broken
    words = {"minimum": "at least", "exclusive_minimum": "more than", "maximum": "at most"}
    unit = f" {spec.unit}" if spec.unit else ""
    raise InvalidSettingValue(
        f"{key} must be {words[kind]} {bound:g}{unit}, got {value!r:.80}",
        {"field": key, kind: bound, "unit": spec.unit})


class SettingsRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def stored(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` when ``key`` is set in the database, else ``(False, None)``."""
        _spec(key)
        with self._db.session() as session:
            row = session.get(RuntimeSetting, key)
            return (True, row.value) if row is not None else (False, None)

    def get(self, key: str) -> Any:
        """The stored value of ``key``, else its default."""
        found, value = self.stored(key)
        return value if found else RUNTIME_SETTINGS[key].default

    def set(self, key: str, value: Any) -> Any:
        """Validate (type and bounds) and store ``value``; answers the stored value."""
        value = checked(key, value)
        with self._db.session() as session:
            row = session.get(RuntimeSetting, key)
            if row is None:
                session.add(RuntimeSetting(key=key, value=value))
            else:
                row.value = value
        return value

    def reset(self, key: str) -> Any:
        """Remove the stored value of ``key``: its default applies again; answers the default."""
        spec = _spec(key)
        with self._db.session() as session:
            row = session.get(RuntimeSetting, key)
            if row is not None:
                session.delete(row)
        return spec.default

    def all(self, stored: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every known key with its effective value (from ``stored``, the rows as a loop's
        shared read saw them, when given)."""
        if stored is None:
            with self._db.read_connection() as connection:  # Core
                stored = {str(key): value for key, value in connection.execute(_ALL)}
        return {key: stored.get(key, spec.default) for key, spec in RUNTIME_SETTINGS.items()}

    def described(self) -> list[dict[str, Any]]:
        """Every known key with its effective value, where it comes from (``runtime_setting``:
        stored in the database; ``default``), its default and its help."""
        with self._db.session() as session:
            stored = {row.key: row.value for row in session.scalars(select(RuntimeSetting))}
        return [{"key": key, "value": stored.get(key, spec.default),
                 "source": "runtime_setting" if key in stored else "default",
                 "default": spec.default, "type": spec.type.__name__, "help": spec.help,
                 **spec.bounds()}
                for key, spec in RUNTIME_SETTINGS.items()]

    def limits(self, overrides: dict[str, Any] | None = None, *,
               stored: dict[str, Any] | None = None) -> dict[str, Any]:
        """The default limits, with per-node or per-run ``overrides`` (validated) on top;
        ``stored``: as :meth:`all`."""
        current = self.all(stored)
        merged = {key: current[key] for key in LIMIT_KEYS}
        for key, value in (overrides or {}).items():
            if key in LIMIT_KEYS and value is not None:
                merged[key] = validate(key, value)
        return merged

    def snapshot(self, node_config: dict[str, Any] | None = None) -> dict[str, Any]:
        """What to store on an execution: the cutover value with its source, and the limits."""
        value, source = effective_cutover(self, node_config or {})
        return {
            "agent_runtime_cutover_enabled": {"value": value, "source": source},
            "limits": self.limits(node_config),
        }


def effective_cutover(
    settings_repo: SettingsRepository, node_config: dict[str, Any]
) -> tuple[bool, CutoverSource]:
    """The node-level override wins, then the runtime setting, then the default (true)."""
    if NODE_CUTOVER_OVERRIDE in node_config:
        return validate("agent_runtime_cutover_enabled",
                        node_config[NODE_CUTOVER_OVERRIDE]), "node_override"
    found, value = settings_repo.stored("agent_runtime_cutover_enabled")
    if found:
        return bool(value), "runtime_setting"
    return bool(RUNTIME_SETTINGS["agent_runtime_cutover_enabled"].default), "default"
