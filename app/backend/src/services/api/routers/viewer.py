"""The studio pages: a static shell at ``/`` (public); it asks for a token and sends it itself.

The files (``index.html``, the scripts, ``studio.css`` and ``vendor/``: the pinned, vendored
layout library with its licence) are package data under ``services/api/static``; the app mounts
that directory at ``/static``. The pages are described in the docs' ``ui`` page.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["viewer"])


def static_dir() -> str:
    return str(resources.files("services.api").joinpath("static"))


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index() -> HTMLResponse:
    page = resources.files("services.api").joinpath("static", "index.html").read_text("utf-8")
    return HTMLResponse(page, headers={"Cache-Control": "no-cache"})
