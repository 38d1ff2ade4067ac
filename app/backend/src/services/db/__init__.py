"""Persistence: SQLAlchemy 2 models, sessions, Alembic migrations and the database-backed ports.

Modules, one concept each: ``base`` (metadata and column types), ``models`` (the tables),
``session`` (engines and :class:`~services.db.session.Database`), ``migrate`` (Alembic), and the
repositories and port implementations (``journal``, ``idempotency``, ``runtime_settings``,
``control``, ``budget``, ``integrations``, ``executions``).
"""
