"""`dlzero dashboard`: a live web page for one run, read from its run directory and nothing else.

Layers: `files` reads run files with a cache keyed on (mtime, size) and turns every unreadable or
corrupt file into a warning; `runview` builds the page's state (strength, training, self-play,
models, games) from them; `replay` turns a game record into positions a browser can draw;
`evaluate` loads the run's best model on demand for evaluation graphs and "analyse a position";
`app` serves it all with Starlette on uvicorn. The page itself (`static/`) draws charts and the
board as SVG in the browser and polls the state, so it needs no network beyond this server.

The dashboard never writes into the run directory and offers nothing that could change the run.
Its web packages are an optional extra (`pip install -e '.[dashboard]'`).
"""

MAX_BODY_BYTES = 64 * 1024  # largest POST body read (a position with a thousand moves is under 6 KB)
INSTALL_HINT = "the dashboard needs its optional packages: pip install -e '.[dashboard]' (starlette, uvicorn)"
