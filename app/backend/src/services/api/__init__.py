"""The HTTP API (FastAPI): routers and schemas; HTTP status mapping lives only here.

:func:`services.api.app.create_app` builds the application; routers live one per module under
:mod:`services.api.routers` and are registered from the list
:data:`services.api.app.ROUTER_MODULES` (adding a router is one line there). Every route under
``/api/`` declares the scope it needs with ``dependencies=[requires(Scope.X)]``
(:mod:`services.api.auth`); the app factory refuses to build an app with an ``/api/`` route that
declares none. Handlers reach the database, the settings and the launcher through
:mod:`services.api.deps`.
"""
