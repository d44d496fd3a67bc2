"""The dashboard's web app (Starlette): the page, its static files, and read-only JSON endpoints.

    GET  /                      the page (static/index.html)
    GET  /static/...            its script and style sheet, served from the package (no CDN)
    GET  /api/state             RunView.state(): everything the page polls
    GET  /api/selfplay?path=&index=    a self-play game from a shard, ready to replay
    GET  /api/gating?path=      a gating game (CSA record)
    GET  /api/values?kind=&path=&index=  the best network's value for each position of that game
    POST /api/analyse           {"position": ..., "playouts": N}: `dlzero analyze` on the best model

Nothing here writes to the run. Reading files and running the network happen in Starlette's
thread pool, so a slow disk or a search never blocks the event loop. An input or file error is a
JSON `{"error": ...}` with status 400, which the page shows beside what it was asked for.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dlzero.dashboard.evaluate import BestModel
from dlzero.dashboard.runview import RunView
from dlzero.errors import DlzeroError

STATIC_DIR = Path(__file__).resolve().parent / "static"


def _error(exc: Exception) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=400)


def _index(request: Request) -> str | int | None:
    raw = request.query_params.get("index")
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        return f"index must be an integer, got {raw!r}"


def create_app(run: str | Path, refresh_seconds: float = 5.0) -> Starlette:
    """The app for one run directory; `refresh_seconds` is how often the page polls."""
    view = RunView(run)
    view.check()
    model = BestModel(view.rd)

    async def page(_: Request) -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def state(_: Request) -> JSONResponse:
        data = await run_in_threadpool(view.state)
        data["refresh_seconds"] = refresh_seconds
        return JSONResponse(data, headers={"Cache-Control": "no-store"})

    def load_game(kind: str, request: Request) -> Any:
        path = request.query_params.get("path", "")
        if kind == "gating":
            return view.gating_game(path)
        index = _index(request)
        if isinstance(index, str):
            raise ValueError(index)
        return view.selfplay_game(path, index)

    async def game(request: Request) -> JSONResponse:
        kind = request.url.path.rsplit("/", 1)[-1]
        try:
            replay = await run_in_threadpool(load_game, kind, request)
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)
        return JSONResponse(replay.to_dict())

    async def values(request: Request) -> JSONResponse:
        kind = request.query_params.get("kind", "gating")
        if kind not in ("gating", "selfplay"):
            return _error(ValueError("kind must be gating or selfplay"))
        try:
            replay = await run_in_threadpool(load_game, kind, request)
            return JSONResponse(await run_in_threadpool(model.values, replay.sfens[:-1]))
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)

    async def analyse(request: Request) -> JSONResponse:
        try:
            body = await request.json()
            position = str(body.get("position", "")).strip()
            playouts = int(body.get("playouts", 200))
        except (ValueError, TypeError, AttributeError):
            return _error(ValueError('send JSON like {"position": "startpos moves 7g7f", "playouts": 200}'))
        if not position:
            return _error(ValueError("paste a position: an SFEN, or 'startpos moves ...'"))
        try:
            return JSONResponse(await run_in_threadpool(model.analyse, position, playouts))
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)

    routes = [
        Route("/", page),
        Route("/api/state", state),
        Route("/api/selfplay", game),
        Route("/api/gating", game),
        Route("/api/values", values),
        Route("/api/analyse", analyse, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette):
        yield
        model.close()

    return Starlette(routes=routes, lifespan=lifespan)
