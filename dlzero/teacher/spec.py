"""Teacher specs, the `--teacher` strings: which adapter, and its settings.

    usi:COMMAND[;Key=value...]     a USI engine, e.g. `usi:/usr/games/gpsusi;LimitDepth=4`
    onnx:miniosl[;Key=value...]    miniosl's pretrained network (`miniosl` alone means the same)

A spec is a player's name read as a teacher (`dlzero.player_names.parse_teacher`: the grammar every player
name has, so `usi:COMMAND;...` names the same engine as a usi: anchor). The command may carry arguments
(`usi:dlzero usi --model m.onnx`); keys are split at `;` and the first `=`; a usi: engine's keys are its USI
options, ours (`go`, `eval_scale`, `temperature`, `timeout`), and the `go` limits byoyomi/nodes/depth as an
anchor writes them. `parse_spec` only reads the string, so the CLI can reject a bad spec before it starts any
worker; `open_teacher` builds the adapter (in each worker process).
"""

from __future__ import annotations

import shlex
import shutil

from dlzero.player_names import MINIOSL_TEACHER_KEYS, PlayerName, parse_teacher
from dlzero.teacher.base import Teacher, TeacherError


def parse_spec(text: str) -> PlayerName:
    """The teacher `text` names (kind usi or miniosl); a TeacherError says what is wrong, also an engine that
    is not there and a setting that is no number."""
    try:
        spec = parse_teacher(text)
    except ValueError as exc:
        raise TeacherError(str(exc)) from None
    if spec.kind == "usi":
        argv = shlex.split(spec.value)
        if not argv or shutil.which(argv[0]) is None:
            raise TeacherError(f"teacher '{text}': no engine at '{argv[0] if argv else spec.value}'")
    _settings(spec, text)  # numbers that do not parse are reported now, not in a worker
    return spec


def _settings(spec: PlayerName, text: str) -> dict:
    """Keyword arguments of the adapter's constructor."""
    from dlzero.teacher.usi import OUR_KEYS

    options = dict(spec.options)
    if spec.kind == "miniosl":
        names = {"model": "model", "batch": "batch_size", "threads": "threads", "temperature": "temperature"}
        return {names[k]: MINIOSL_TEACHER_KEYS[k](v) for k, v in options.items()}
    kwargs: dict = {"options": {k: v for k, v in options.items() if k not in OUR_KEYS}}
    limits = " ".join(f"{k} {v}" for k, v in spec.settings)
    if limits and "go" in options:
        raise TeacherError(f"teacher '{text}': give its go= or its limits (byoyomi, nodes, depth), not both")
    if limits or "go" in options:
        kwargs["go"] = limits or options["go"]
    try:
        for key, arg in (("eval_scale", "eval_scale"), ("temperature", "temperature"), ("timeout", "timeout_s")):
            if key in options:
                kwargs[arg] = float(options[key])
    except ValueError as exc:
        raise TeacherError(f"teacher '{text}': {exc}") from None
    return kwargs


def open_teacher(spec: PlayerName | str) -> Teacher:
    """The adapter a spec names (engines start on their first position, networks load now)."""
    text = spec if isinstance(spec, str) else spec.canonical()
    if isinstance(spec, str):
        spec = parse_spec(spec)
    if spec.kind == "usi":
        from dlzero.teacher.usi import UsiTeacher

        return UsiTeacher(spec.value, **_settings(spec, text))
    from dlzero.teacher.onnx_miniosl import MinioslTeacher

    return MinioslTeacher(**_settings(spec, text))
