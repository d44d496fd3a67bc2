"""`dlzero dashboard` on a run made by `dlzero loop`: what the server reads, and what a person sees in Chromium.

The run is real (the loop test's tiny settings, two generations); only `metrics/elo.csv` is written
here, in the rating's format, because the rating command is another part of dlzero. Browser tests
drive Debian's `chromium` through `chromium-driver` with selenium and skip, saying how to install
them, when either is missing; nothing downloads a browser.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from test_loop import TINY

pytest.importorskip("starlette", reason="the dashboard extra is not installed: pip install -e '.[dashboard]'")
uvicorn = pytest.importorskip("uvicorn", reason="the dashboard extra is not installed: pip install -e '.[dashboard]'")

from dlzero.dashboard.app import create_app  # noqa: E402
from dlzero.dashboard.runview import RunView  # noqa: E402
from dlzero.errors import DataError  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BROWSER_HINT = ("headless Chromium is not installed: `apt-get install chromium chromium-driver` (Debian; "
                "`.ci/run` does this) and `pip install selenium` (part of '.[dev]')")
ELO_HEADER = ["player", "generation", "elo", "elo_low", "elo_high", "games", "anchor", "wall_seconds"]
START_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory) -> Path:
    """A real two-generation run of `dlzero loop` with the loop test's tiny settings."""
    run = tmp_path_factory.mktemp("dash") / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run), "--generations", "2",
           *TINY]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return run


def write_elo(run: Path, generations: list[int]) -> None:
    """metrics/elo.csv as the rating writes it: an anchor row plus one row per rated generation."""
    rows = [{"player": "random", "generation": "", "elo": "-400.0", "elo_low": "", "elo_high": "", "games": "40",
             "anchor": "1", "wall_seconds": ""}]
    for g in generations:
        rows.append({"player": f"gen-{g:04d}", "generation": str(g), "elo": f"{25.0 * g:.1f}",
                     "elo_low": f"{25.0 * g - 60:.1f}", "elo_high": f"{25.0 * g + 60:.1f}", "games": "20",
                     "anchor": "0", "wall_seconds": f"{10.0 * g:.1f}"})
    tmp = run / "metrics" / ".elo.csv.tmp"
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=ELO_HEADER, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(run / "metrics" / "elo.csv")


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with (mtime_ns, size): any write or new file changes it."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(run: Path, refresh: float = 0.5, **options):
    """The dashboard app on uvicorn in a thread, on a free loopback port; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(run, refresh_seconds=refresh, **options), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "dashboard server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=60) as res:
        return json.loads(res.read())


# ---------------------------------------------------------------- server side, no browser


def test_state_reads_the_run_and_writes_nothing(loop_run, tmp_path):
    run = copy_run(loop_run, tmp_path / "run")
    shutil.rmtree(run / "data" / "gen-0000")  # and creates no folder either (RunDir.open would)
    before = snapshot(run)
    view = RunView(run)
    state = view.state()
    for game in state["gating_games"]:
        view.gating_game(game["path"])
    with serve(run) as url:
        get_json(f"{url}/api/state")
        game = state["gating_games"][0]["path"]
        get_json(f"{url}/api/values?kind=gating&path={game}")
    assert snapshot(run) == before
    assert not (run / "data" / "gen-0000").exists()
    assert [m["generation"] for m in state["models"]] == [0, 1, 2]
    assert state["warnings"] == []


def test_state_matches_the_runs_files(loop_run):
    state = RunView(loop_run).state()
    with open(loop_run / "metrics" / "ratings.csv", newline="") as fh:
        ratings = list(csv.DictReader(fh))
    # until elo.csv exists, strength is the gate results: generation 0 plus one point per gated candidate
    assert state["strength"]["source"] == "ratings.csv"
    assert [p["generation"] for p in state["strength"]["points"]] == [0] + [int(r["generation"]) for r in ratings]
    for point, row in zip(state["strength"]["points"][1:], ratings, strict=True):
        assert point["status"] == ("promoted" if row["promoted"] == "1" else "rejected")
    # the page and progress.png draw one chain (dlzero.gating.chain)
    from dlzero.gating.chain import read_gates
    from dlzero.progress.plots import chain_series

    promoted, rejected = chain_series(read_gates(loop_run / "metrics" / "ratings.csv"))
    assert sorted((p["generation"], p["elo"]) for p in state["strength"]["points"]) == sorted(promoted + rejected)
    # the training charts need only columns that metrics.csv has
    from dlzero.dashboard.runview import TRAIN_CHART
    from dlzero.runfiles import TRAIN_COLUMNS

    assert set(TRAIN_CHART) <= set(TRAIN_COLUMNS)
    with open(loop_run / "metrics" / "metrics.csv", newline="") as fh:
        steps = [float(r["step"]) for r in csv.DictReader(fh)]
    assert [r["step"] for r in state["training"]] == steps
    # self-play statistics agree with the hcpe3 shards, read here by the data layer itself
    from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, read_hcpe3

    games = [g for p in sorted((loop_run / "data").glob("gen-*/*.hcpe3")) for g in read_hcpe3(p)]
    rows = state["selfplay"]["generations"]
    assert sum(r["games"] for r in rows) == len(games)
    assert sum(r["positions"] for r in rows) == sum(len(g.moves) for g in games)
    black = sum(g.winner == BLACK_WIN for g in games)
    draws = sum(g.winner == RESULT_DRAW for g in games)
    assert sum(r["sente_win_rate"] * r["games"] for r in rows) == pytest.approx(black)
    assert sum(r["draw_rate"] * r["games"] for r in rows) == pytest.approx(draws)
    assert all(r["games_per_hour"] and r["games_per_hour"] > 0 for r in rows)


def test_replays_follow_the_records(loop_run):
    import cshogi
    import cshogi.CSA

    view = RunView(loop_run)
    state = view.state()
    path = state["gating_games"][0]["path"]
    replay = view.gating_game(path)
    record = cshogi.CSA.Parser.parse_file(str(loop_run / path))[0]
    board = cshogi.Board(record.sfen)
    assert replay.sfens[0] == board.sfen()
    for move, sfen, usi in zip(record.moves, replay.sfens[1:], replay.usi, strict=True):
        assert usi == cshogi.move_to_usi(move)
        board.push(move)
        assert sfen == board.sfen()
    latest = view.selfplay_game(state["latest_game"]["path"])
    assert len(latest.sfens) == len(latest.moves) + 1 == len(latest.values) + 1
    assert all(0.0 <= v <= 1.0 for v in latest.values)


def test_requests_outside_the_run_are_refused(loop_run):
    view = RunView(loop_run)
    for bad in ("../../etc/passwd", "config.yaml", "models/gen-0000.pt", "games/../run.json"):
        with pytest.raises(DataError):
            view.gating_game(bad)
        with pytest.raises(DataError):
            view.selfplay_game(bad)
    with serve(loop_run) as url, pytest.raises(urllib.error.HTTPError) as err:
        get_json(f"{url}/api/gating?path=../../etc/passwd")
    assert err.value.code == 400


def test_bad_elo_csv_is_a_warning_and_gate_results_are_shown(loop_run, tmp_path):
    run = copy_run(loop_run, tmp_path / "run")
    write_elo(run, [0, 1, 2])
    good = RunView(run).state()
    assert good["strength"]["source"] == "elo.csv"
    assert [p["generation"] for p in good["strength"]["points"]] == [0, 1, 2]
    assert good["strength"]["anchors"] == [{"player": "random", "elo": -400.0}]
    text = (run / "metrics" / "elo.csv").read_text().replace("25.0", "lots")
    (run / "metrics" / "elo.csv").write_text(text)
    bad = RunView(run).state()
    assert bad["strength"]["source"] == "ratings.csv"
    assert any("metrics/elo.csv" in w and "not a number" in w for w in bad["warnings"])


def test_elo_csv_with_several_scales_draws_the_models_one(loop_run, tmp_path):
    """The rating's current elo.csv: each Elo names its zero and prior; a player of sweeps only has none."""
    run = copy_run(loop_run, tmp_path / "run")
    (run / "metrics" / "elo.csv").write_text(
        "player,generation,elo,elo_low,elo_high,games,anchor,wall_seconds,relative_to,prior_draws,wins,draws,losses\n"
        "gen-0000,0,,,,20,1,0,,1,0,0,20\n"
        "gen-0001,1,120.0,20.0,220.0,40,0,10,alphabeta:1,1,22,2,16\n"
        "gen-0002,2,180.0,70.0,290.0,40,0,20,alphabeta:1,1,25,1,14\n"
        "alphabeta:1,,0.0,0.0,0.0,80,1,,alphabeta:1,1,30,3,47\n"
        "yane,,0.0,0.0,0.0,20,0,,yane,1,10,1,9\n"
        "random,,,,,60,1,,,1,0,0,60\n")
    state = RunView(run).state()
    strength = state["strength"]
    assert strength["source"] == "elo.csv" and not any("elo.csv" in w for w in state["warnings"])
    assert [(p["generation"], p["elo"]) for p in strength["points"]] == [(1, 120.0), (2, 180.0)]
    assert strength["anchors"] == [{"player": "alphabeta:1", "elo": 0.0}]
    assert strength["label"] == ("Elo (1 virtual draw per pairing, alphabeta:1 = 0) (metrics/elo.csv), 95% "
                                 "intervals; not on this scale (no informative pairing with it): gen-0000, "
                                 "yane, random")


def test_analyse_uses_the_best_model(loop_run):
    with serve(loop_run) as url:
        req = urllib.request.Request(f"{url}/api/analyse", method="POST",
                                     data=json.dumps({"position": "startpos moves 7g7f", "playouts": 16}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as res:
            answer = json.loads(res.read())
        best = json.loads((loop_run / "models" / "best.json").read_text())["generation"]
        assert answer["model"] == f"gen-{best:04d}"
        import cshogi

        board = cshogi.Board()
        board.push_usi("7g7f")
        assert answer["bestmove"] in [cshogi.move_to_usi(m) for m in board.legal_moves]
        assert answer["playouts"] >= 16
        status, answer = post(f"{url}/api/analyse", json.dumps({"position": "startpos moves 1a1b"}).encode())
        assert status == 400 and "1a1b" in answer["error"]


def post(url: str, body, headers: dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of a POST, error statuses included; the answer must be strict UTF-8 JSON."""
    req = urllib.request.Request(url, method="POST", data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as res:
            status, raw = res.status, res.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    return status, json.loads(raw.decode("utf-8"))


def test_analyse_answers_bad_bodies_with_400_or_413_and_goes_on(loop_run):
    bad = {
        b'{"position": "startpos", "playouts": Infinity}': "Infinity is not a JSON value",
        b'{"position": "startpos", "playouts": NaN}': "NaN is not a JSON value",
        b'{"position": "startpos", "playouts": 1e400}': "playouts must be an integer",
        b'{"position": "startpos", "playouts": true}': "playouts must be an integer",
        b'{"position": "startpos", "playouts": ' + b"9" * 5000 + b"}": "not valid JSON",
        b'{"position": ' + b"[" * 20_000 + b"]" * 20_000 + b"}": "nested too deeply",
        b'{"position": ["startpos"]}': "paste a position",
        b'{"position": "startpos \xff"}': "not valid JSON",
        b"[1, 2]": "send a JSON object",
        b"not json": "not valid JSON",
        b'{"position": "\\ud800", "playouts": 4}': "non-ASCII",  # echoed back as a \u escape, still UTF-8
    }
    with serve(loop_run, max_body_bytes=50_000) as url:
        for body, why in bad.items():
            status, answer = post(f"{url}/api/analyse", body, {"Content-Type": "application/json"})
            assert (status, why in answer["error"]) == (400, True), (body[:60], status, answer)
        too_big = json.dumps({"position": "startpos", "pad": "x" * 60_000}).encode()
        status, answer = post(f"{url}/api/analyse", too_big)
        assert status == 413 and "over 50000" in answer["error"]
        status, answer = post(f"{url}/api/analyse", b" " * 20_000_000)  # far more than any socket buffer holds
        assert status == 413 and "20000000 bytes" in answer["error"]
        chunked = iter([too_big[:30_000], too_big[30_000:]])  # no Content-Length: counted as it arrives
        status, answer = post(f"{url}/api/analyse", chunked, {"Transfer-Encoding": "chunked"})
        assert status == 413 and "--max-body-bytes" in answer["error"]
        status, answer = post(f"{url}/api/analyse", b'{"position": "startpos", "playouts": 4}')
        assert status == 200 and answer["playouts"] >= 4


def test_cli_serves_on_loopback_by_default(loop_run):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "dashboard", "--run", str(loop_run), "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as res:
                    assert b"dlzero" in res.read()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "dashboard did not answer"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(30)


def test_cli_without_the_extra_says_how_to_install(loop_run, monkeypatch, capsys):
    from dlzero.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the extra were not installed
    assert main(["dashboard", "--run", str(loop_run)]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[dashboard]'" in err and "uvicorn" in err


def test_cli_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    from dlzero.cli import main

    assert main(["dashboard", "--run", str(tmp_path)]) == 2
    assert "not a dlzero run directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(BROWSER_HINT)
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.skip(BROWSER_HINT)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,2400"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def wait_for(driver, condition, what: str, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d), message=what)


def count(driver, selector: str) -> int:
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector)


def board_pieces(driver, board: str) -> list[tuple[str, str]]:
    return sorted(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' .piece')]"
        ".map(g => [g.dataset.square, g.dataset.piece])", f"#{board}"))


def test_browser_shows_strength_models_and_replays(browser, loop_run, tmp_path):
    run = copy_run(loop_run, tmp_path / "run")
    write_elo(run, [0, 1, 2])
    with serve(run) as url:
        browser.get(url)
        wait_for(browser, lambda d: d.execute_script("return document.body.dataset.loaded === '1'"), "page loaded")
        # the Elo chart: one point per rated generation, on both x axes
        assert count(browser, "#elo-gen circle.elo-point") == 3
        assert count(browser, "#elo-time circle.elo-point") == 3
        titles = browser.execute_script(
            "return [...document.querySelectorAll('#elo-gen circle.elo-point title')].map(t => t.textContent)")
        assert [t.split(":")[0] for t in titles] == ["gen-0000", "gen-0001", "gen-0002"]
        # labelled as Elo from the anchored fit (metrics/elo.csv), not the gate chain
        label = browser.find_element("id", "strength-label").text
        assert label.startswith("Elo (") and "metrics/elo.csv" in label and "gate results" not in label
        # the models table lists every generation
        rows = browser.find_elements("css selector", "#models-table tbody tr")
        assert sorted(int(r.get_attribute("data-generation")) for r in rows) == [0, 1, 2]
        best = json.loads((run / "models" / "best.json").read_text())["generation"]
        assert "best" in browser.find_element("css selector", f"#models-table tr[data-generation='{best}']").text
        # a gating game starts at the start position with 40 pieces, and the board changes as it steps on
        wait_for(browser, lambda d: count(d, "#gating-board .piece") > 0, "gating board drawn")
        assert count(browser, "#gating-board .piece") == 40
        svg = browser.find_element("css selector", "#gating-board svg")
        assert svg.get_attribute("data-sfen") == START_SFEN
        start = board_pieces(browser, "gating-board")
        browser.find_element("id", "gating-next").click()
        assert browser.find_element("id", "gating-ply").text.startswith("ply 1 /")
        after = board_pieces(browser, "gating-board")
        assert after != start and len(after) == 40
        assert browser.find_element("css selector", "#gating-board svg").get_attribute("data-sfen") != START_SFEN
        browser.find_element("id", "gating-prev").click()
        assert board_pieces(browser, "gating-board") == start
        # its evaluation graph arrives from the best network
        wait_for(browser, lambda d: count(d, "#gating-eval polyline") == 1, "evaluation graph")
        # the latest self-play game is shown at its last ply, with its move list
        wait_for(browser, lambda d: count(d, "#latest-moves li") > 0, "latest self-play game")
        plies = count(browser, "#latest-moves li")
        assert browser.find_element("id", "latest-ply").text == f"ply {plies} / {plies}"
        assert count(browser, "#warnings .warning") == 0
        # the page follows the run: a newly rated generation appears without a reload
        write_elo(run, [0, 1, 2, 3])
        wait_for(browser, lambda d: count(d, "#elo-gen circle.elo-point") == 4, "new Elo point", timeout=30)
        screenshot = os.environ.get("DLZERO_DASHBOARD_SCREENSHOT")
        if screenshot:
            browser.save_screenshot(screenshot)


def test_browser_warns_about_corrupt_files(browser, loop_run, tmp_path):
    run = copy_run(loop_run, tmp_path / "run")
    (run / "metrics" / "metrics.csv").write_bytes(b"\x00\xff\x10garbage\nnot,a,metrics,file\n")
    shard = next((run / "data").glob("gen-*/*.hcpe3"))
    shard.write_bytes(shard.read_bytes()[:50])  # a torn shard
    with serve(run) as url:
        browser.get(url)
        wait_for(browser, lambda d: d.execute_script("return document.body.dataset.loaded === '1'"), "page loaded")
        warnings = [w.text for w in browser.find_elements("css selector", "#warnings .warning")]
        assert any("metrics/metrics.csv" in w for w in warnings), warnings
        assert any(shard.name in w and "corrupt shard" in w for w in warnings), warnings
        # everything else is still there
        assert len(browser.find_elements("css selector", "#models-table tbody tr")) == 3
        assert count(browser, "#elo-gen circle.elo-point") == 3  # gate results: generation 0 plus 2 candidates


def test_a_torn_last_csv_line_is_left_out_without_a_warning(loop_run, tmp_path):
    run = copy_run(loop_run, tmp_path / "run")
    path = run / "metrics" / "metrics.csv"
    whole = RunView(run).state()["training"]
    path.write_text(path.read_text() + "999,3,32,4.1")  # a writer appending in place, caught mid-line
    state = RunView(run).state()
    assert state["training"] == whole and state["warnings"] == []


def test_throughput_counts_time_when_some_writer_ran():
    from dlzero.dashboard.runview import ShardStats, _busy_seconds

    def shard(session: str, start: float, mtime: float) -> ShardStats:
        return ShardStats(games=1, plies=1, targets=0, black_wins=0, draws=0, max_moves=0, mtime=mtime,
                          session=session, session_start=start)

    # two workers side by side (0..100 and 20..120, one with two shards), then, after training and
    # gating, a later session (500..560): 120 + 60 seconds of self-play, not 560
    items = [shard("w0", 0, 50), shard("w0", 0, 100), shard("w1", 20, 120), shard("w0b", 500, 560)]
    assert _busy_seconds(items) == 180
    assert _busy_seconds([shard("w0", 10, 10)]) is None


def test_heldout_rows_and_time_shares_come_from_the_runs_files(loop_run):
    state = RunView(loop_run).state()
    with open(loop_run / "metrics" / "validation.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows, "the loop scored no model on held-out games"
    assert [(r["model"], r["set"]) for r in state["heldout"]] == [(r["model"], r["set"]) for r in rows]
    # NaN (no value target: every game of a tiny run hits the move cap, train.value_of_capped_games) is None
    assert [r["value_loss"] for r in state["heldout"]] == [None if r["value_loss"] == "nan" else float(r["value_loss"])
                                                            for r in rows]
    assert state["heldout"][0]["generation"] == int(rows[0]["model"].removeprefix("gen-"))
    shares = state["time_shares"]
    assert {"selfplay", "train", "gate"} <= set(shares) and all(0 < v <= 1 for v in shares.values())
    assert shares["selfplay"] + shares["train"] + shares["gate"] <= 1.0 + 1e-9  # the sequential loop: no overlap
