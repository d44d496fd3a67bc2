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
JSON `{"error": ...}` with status 400, which the page shows beside what it was asked for; a POST
body over `max_body_bytes` is a 413, and no more than that is ever held in memory. Responses are
UTF-8 JSON whatever the input held (a lone surrogate is written as a `\\u` escape).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dlzero.dashboard import MAX_BODY_BYTES
from dlzero.dashboard.evaluate import MAX_PLAYOUTS, BestModel
from dlzero.dashboard.runview import RunView
from dlzero.errors import DlzeroError

STATIC_DIR = Path(__file__).resolve().parent / "static"
ANALYSE_HINT = '{"position": "startpos moves 7g7f", "playouts": 200}'


class Json(JSONResponse):
    """A JSON response that is valid UTF-8 even when it echoes a lone surrogate from the request."""

    def render(self, content: object) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


class BadBody(ValueError):
    """A request body the endpoint cannot use; `status` is 400, or 413 when it is too large."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _error(exc: Exception, status: int = 400) -> Json:
    return Json({"error": str(exc)}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body; BadBody 413 when it is over `limit` bytes.

    Past the limit the rest is read and dropped, never kept: a server that answered before the
    client finished sending would close on unread data, and the client would see a reset instead
    of the 413 and its message. A client that leaves before its body ends (a `Content-Length` larger
    than what it sent) is a BadBody too: Starlette's ClientDisconnect reached uvicorn, which logged
    it with a traceback; the answer now goes nowhere, quietly.
    """
    body, size = bytearray(), 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size <= limit:
                body += chunk
    except ClientDisconnect:
        raise BadBody(f"the client left after {size} bytes of its body") from None
    if size > limit:
        raise BadBody(f"request body of {size} bytes is over {limit} (dlzero dashboard --max-body-bytes)", 413)
    return bytes(body)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def analyse_request(body: bytes) -> tuple[str, int]:
    """(position, playouts) of a POST /api/analyse body; BadBody says what is wrong with it."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise BadBody(f"JSON nested too deeply; send {ANALYSE_HINT}") from None
    except ValueError as exc:  # bad JSON, not UTF-8, NaN/Infinity, an integer too long to convert
        raise BadBody(f"not valid JSON ({exc}); send {ANALYSE_HINT}") from None
    if not isinstance(data, dict):
        raise BadBody(f"send a JSON object like {ANALYSE_HINT}")
    position, playouts = data.get("position", ""), data.get("playouts", 200)
    if not isinstance(position, str) or not position.strip():
        raise BadBody("paste a position: an SFEN, or 'startpos moves ...'")
    if not isinstance(playouts, int) or isinstance(playouts, bool) or not 1 <= playouts <= MAX_PLAYOUTS:
        raise BadBody(f"playouts must be an integer 1..{MAX_PLAYOUTS}")
    return position.strip(), playouts


def _index(request: Request) -> str | int | None:
    raw = request.query_params.get("index")
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        return f"index must be an integer, got {raw!r}"


def create_app(run: str | Path, refresh_seconds: float = 5.0, max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The app for one run directory; `refresh_seconds` is how often the page polls, `max_body_bytes`
    the largest POST body read."""
    view = RunView(run)
    view.check()
    model = BestModel(view.rd)

    async def page(_: Request) -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def state(_: Request) -> Json:
        data = await run_in_threadpool(view.state)
        data["refresh_seconds"] = refresh_seconds
        return Json(data, headers={"Cache-Control": "no-store"})

    def load_game(kind: str, request: Request) -> Any:
        path = request.query_params.get("path", "")
        if kind == "gating":
            return view.gating_game(path)
        index = _index(request)
        if isinstance(index, str):
            raise ValueError(index)
        return view.selfplay_game(path, index)

    async def game(request: Request) -> Json:
        kind = request.url.path.rsplit("/", 1)[-1]
        try:
            replay = await run_in_threadpool(load_game, kind, request)
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)
        return Json(replay.to_dict())

    async def values(request: Request) -> Json:
        kind = request.query_params.get("kind", "gating")
        if kind not in ("gating", "selfplay"):
            return _error(ValueError("kind must be gating or selfplay"))
        try:
            replay = await run_in_threadpool(load_game, kind, request)
            return Json(await run_in_threadpool(model.values, replay.sfens[:-1]))
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)

    async def analyse(request: Request) -> Json:
        try:
            position, playouts = analyse_request(await read_body(request, max_body_bytes))
        except BadBody as exc:
            return _error(exc, exc.status)
        try:
            answer = await run_in_threadpool(model.analyse, position, playouts)
        except (DlzeroError, ValueError, OSError) as exc:
            return _error(exc)
        return Json(answer, status_code=400 if "error" in answer else 200)  # a bad position is bad input too

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
