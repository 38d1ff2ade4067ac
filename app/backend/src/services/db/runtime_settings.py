"""Runtime settings: what operators change while the system runs, stored as JSON in the database.

Every read goes to the database (no cache), so a change applies at the next check of every
running execution. Known keys, their types and defaults are in :data:`RUNTIME_SETTINGS`; unknown
keys are refused.
"""

from __future__ import annotations

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
    key: str
    type: type[Any]
    default: Any
    help: str


_SPECS = (
    SettingSpec("agent_runtime_cutover_enabled", bool, True,
                "Run agent nodes on the SDK tool loop (false: legacy runtime)."),
    SettingSpec(NODE_OVERRIDES_ALLOWED, bool, False,
                "Let a 'run' token store and start flowcharts whose nodes override operator "
                "settings (__agent_runtime_cutover_enabled); false: only 'admin' may."),
    SettingSpec("killswitch_engaged", bool, False,
                "Stop every execution before its next model or tool call."),
    SettingSpec("max_iterations", int, 24, "Default model-call cap per execution."),
    SettingSpec("max_budget_usd", float, 2.0, "Default spending cap per execution (USD)."),
    SettingSpec("repo_daily_budget_usd", float, 20.0,
                "Spending cap per repository and UTC day (USD)."),
    SettingSpec("wall_clock_s", float, 3600.0, "Default wall-clock limit per execution (s)."),
    SettingSpec("stall_s", float, 600.0, "Default inactivity limit per execution (s)."),
    SettingSpec("context_token_budget", int, 120_000,
                "Conversation size (estimated tokens) above which old tool outputs are elided."),
    SettingSpec("lease_ttl_s", float, 60.0,
                "How long an execution's lease lasts without a heartbeat (s)."),
    SettingSpec("heartbeat_s", float, 15.0, "How often a running execution renews its lease (s)."),
    SettingSpec("reaper_interval_s", float, 30.0,
                "How often the reaper looks for executions whose lease expired (s)."),
    SettingSpec("queued_timeout_s", float, 60.0,
                "How long a dispatched execution may stay queued, never claimed, before the "
                "reaper dispatches it again (s)."),
    SettingSpec("max_attempts", int, 5,
                "Attempts (lease claims) an execution gets before the reaper gives up on it."),
)
RUNTIME_SETTINGS: dict[str, SettingSpec] = {spec.key: spec for spec in _SPECS}
LIMIT_KEYS = ("max_iterations", "max_budget_usd", "repo_daily_budget_usd", "wall_clock_s",
              "stall_s", "context_token_budget")


class UnknownSetting(NotFound, KeyError):
    """No runtime setting has this key (a ``KeyError`` too, as a mapping lookup)."""

    what = "runtime setting"

    def __init__(self, key: str) -> None:
        super().__init__(key, known=sorted(RUNTIME_SETTINGS))

    def __str__(self) -> str:
        return (f"unknown setting {self.ident!r}; known settings: "
                f"{', '.join(sorted(RUNTIME_SETTINGS))}")


class InvalidSettingValue(ValueError):
    pass


def _spec(key: str) -> SettingSpec:
    try:
        return RUNTIME_SETTINGS[key]
    except KeyError:
        raise UnknownSetting(key) from None


def validate(key: str, value: Any) -> Any:
    """``value`` converted to the type of ``key`` (strict: ``"yes"`` is not a bool)."""
    spec = _spec(key)
    try:
        return TypeAdapter(spec.type).validate_python(value, strict=spec.type is not float)
    except ValidationError as exc:
        raise InvalidSettingValue(
            f"{key} expects a {spec.type.__name__}, got {value!r}"
        ) from exc


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
        """Validate and store ``value``; answers the stored value."""
        value = validate(key, value)
        with self._db.session() as session:
            row = session.get(RuntimeSetting, key)
            if row is None:
                session.add(RuntimeSetting(key=key, value=value))
            else:
                row.value = value
        return value

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
                 "default": spec.default, "type": spec.type.__name__, "help": spec.help}
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
