"""Bad input to `dlzero analyze` costs one answer, never the engine (issue 24, findings 1 and 5).

Each case drives the real command on pipes: a line nested 100,000 deep, a line longer than the
limit, bytes that are not UTF-8, a lone-surrogate escape; each is followed by a good query that
must still be answered, and the process must end with status 0 after answering everything. The
over-long line's cost in memory is measured as the child's peak RSS (`wait4`), against the same
command without that line. The in-process cases inject a fault where no real input reaches: a
bug while handling one line, and the input stream itself failing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from dlzero.analysis import AnalysisEngine, serve
from dlzero.analysis_query import QueryReader
from dlzero.config import Config
from dlzero.inference import NullEvaluator

GOOD = b'{"id": "good", "position": "startpos", "maxVisits": 2}\n'


def analyze(model: str, data: bytes, *args: str) -> tuple[int, list[dict], bytes]:
    """Run `dlzero analyze` on `data`: (exit status, answers, raw stdout)."""
    done = subprocess.run([sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, "--threads", "1", *args],
                          input=data, capture_output=True, timeout=300)
    return done.returncode, [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()], done.stdout


def answered(answers: list[dict], qid: str) -> bool:
    return any(a.get("id") == qid and a.get("isDuringSearch") is False and "bestmove" in a for a in answers)


def test_a_line_nested_100000_deep_is_one_error_and_the_engine_goes_on(model):
    nested = b'{"id": "deep", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    shallow = b'{"id": "deep2", "position": "startpos", "x": ' + b"[" * 100 + b"]" * 100 + b"}\n"
    rc, answers, _ = analyze(model, nested + shallow + GOOD)
    assert rc == 0
    errors = {a["id"]: a["error"] for a in answers if "error" in a}
    assert set(errors) == {"deep", "deep2"}
    assert all("nested too deeply" in e for e in errors.values())
    assert answered(answers, "good")


def test_an_over_long_line_is_skipped_without_being_held_in_memory(model, tmp_path):
    big = b'{"id": "big", "position": "startpos", "x": "' + b"a" * (64 << 20) + b'"}\n'
    small = b'{"id": "small", "position": "startpos", "maxVisits": 2, "x": "' + b"a" * 3000 + b'"}\n'
    peak = {}
    for name, data in (("without", GOOD), ("with", big + small + GOOD)):
        with open(tmp_path / f"{name}.out", "wb") as out, open(tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, "--threads",
                                     "1", "--max-line-bytes", "4096"], stdin=subprocess.PIPE, stdout=out, stderr=err)
            proc.stdin.write(data)
            proc.stdin.close()
            _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so the peak RSS is this child's alone
        assert os.waitstatus_to_exitcode(status) == 0, (tmp_path / f"{name}.err").read_text()[-2000:]
        peak[name] = usage.ru_maxrss  # KiB
    answers = [json.loads(line) for line in (tmp_path / "with.out").read_text("utf-8").splitlines()]
    error = next(a for a in answers if a.get("id") == "big")
    assert "longer than 4096 bytes" in error["error"] and "max_line_bytes" in error["error"]
    assert answered(answers, "small") and answered(answers, "good")
    # the 64 MiB line is never in memory: the peak grows by far less than the line's size
    assert peak["with"] - peak["without"] < 16 * 1024, peak


def test_the_line_limit_is_a_config_key(model):
    line = b'{"id": "x", "position": "startpos", "pad": "' + b"a" * 600 + b'"}\n'
    rc, answers, _ = analyze(model, line + GOOD, "--set", "analysis.max_line_bytes=512")
    assert rc == 0
    assert "longer than 512 bytes" in next(a for a in answers if a["id"] == "x")["error"]
    assert answered(answers, "good")


def test_bytes_that_are_not_utf8_are_escaped_in_the_error_and_stdout_stays_utf8(model):
    data = (b'{"id": "bad-bytes", "position": "startpos \xff\xfe moves"}\n'
            b'{"id": "lone", "position": "\\ud800"}\n'
            b'{"id": "\\udc80", "position": "startpos", "maxVisits": 2}\n' + GOOD)
    rc, answers, raw = analyze(model, data)
    assert rc == 0
    raw.decode("utf-8")  # strict: every byte of stdout is UTF-8
    by_id = {a["id"]: a for a in answers if a.get("isDuringSearch") is not True}
    assert "not valid UTF-8" in by_id["bad-bytes"]["error"] and "\\xff" in by_id["bad-bytes"]["error"]
    assert by_id["lone"]["field"] == "position"
    assert "bestmove" in by_id["\udc80"]  # the id comes back exactly as sent, as a \u escape
    assert answered(answers, "good")


def test_nan_infinity_and_huge_integers_are_errors_with_their_ids():
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=4)
    answers = engine.answer([
        '{"id": "nan", "position": "startpos", "reportDuringSearchEvery": NaN}',
        '{"id": "inf", "position": "startpos", "maxVisits": Infinity}',
        '{"id": "digits", "position": "startpos", "priority": ' + "9" * 5000 + "}",
        '{"id": "ok", "position": "startpos"}',
    ])
    by_id = {a["id"]: a for a in answers}
    assert "NaN is not a JSON value" in by_id["nan"]["error"]
    assert "Infinity is not a JSON value" in by_id["inf"]["error"]
    assert "not valid JSON" in by_id["digits"]["error"]
    assert by_id["ok"]["playouts"] >= 4


class BrokenReader(QueryReader):
    """A reader with a bug that one line triggers: the injected fault of a line's handling."""

    def read(self, line: str):
        if "trigger" in line:
            raise KeyError("an unforeseen bug")
        return super().read(line)


def test_an_exception_while_handling_one_line_is_that_lines_answer_only():
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=4)
    engine.reader = BrokenReader(engine.cfg, engine.playouts)
    out = io.StringIO()
    serve(engine, io.BytesIO(b'{"id": 7, "trigger": 1}\n' + GOOD), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0] == {"id": 7, "error": "internal error on this line: KeyError: 'an unforeseen bug'"}
    assert answered(answers, "good")


class FailingStream(io.BytesIO):
    """Input that breaks after its first line (a pipe error): the injected fault of the stream itself."""

    def readline(self, size: int = -1) -> bytes:
        if self.tell() > 0:
            raise OSError(5, "Input/output error")
        return super().readline(size)


def test_a_failing_input_stream_is_raised_after_the_queue_is_answered():
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=4)
    out = io.StringIO()
    with pytest.raises(OSError, match="Input/output error"):
        serve(engine, FailingStream(GOOD + GOOD), out)
    assert answered([json.loads(line) for line in out.getvalue().splitlines()], "good")
