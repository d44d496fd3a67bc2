"""Teacher specs, the `--teacher` strings: which adapter, and its settings.

    usi:COMMAND[;Key=value...]     a USI engine, e.g. `usi:/usr/games/gpsusi;LimitDepth=4`
    onnx:miniosl[;Key=value...]    miniosl's pretrained network (`miniosl` alone means the same)

The command may carry arguments (`usi:dlzero usi --model m.onnx`); keys are split at `;` and the
first `=`. `parse_spec` only reads the string, so the CLI can reject a bad spec before it starts any
worker; `open_teacher` builds the adapter (in each worker process).
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field

from dlzero.teacher.base import Teacher, TeacherError

KINDS = ("usi", "onnx")
ONNX_ADAPTERS = ("miniosl",)
MINIOSL_KEYS = {"model": str, "batch": int, "threads": int, "temperature": float}


@dataclass(frozen=True)
class TeacherSpec:
    kind: str  # "usi" or "onnx"
    target: str  # the engine command, or the ONNX adapter's name
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""


def parse_spec(text: str) -> TeacherSpec:
    """Split a spec into kind, target and options; a TeacherError says what is wrong."""
    head, *parts = [p.strip() for p in text.split(";")]
    if head == "miniosl":
        head = "onnx:miniosl"
    kind, sep, target = head.partition(":")
    if not sep or kind not in KINDS or not target.strip():
        raise TeacherError(f"teacher '{text}': expected usi:COMMAND[;Key=value...] or onnx:miniosl[;Key=value...]")
    options: dict[str, str] = {}
    for part in parts:
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise TeacherError(f"teacher '{text}': '{part}' is not Key=value")
        options[key.strip()] = value.strip()
    if kind == "onnx":
        if target not in ONNX_ADAPTERS:
            raise TeacherError(f"teacher '{text}': no ONNX adapter '{target}' (known: {', '.join(ONNX_ADAPTERS)})")
        unknown = sorted(set(options) - set(MINIOSL_KEYS))
        if unknown:
            raise TeacherError(f"teacher '{text}': unknown key(s) {', '.join(unknown)} "
                               f"(known: {', '.join(MINIOSL_KEYS)})")
    if kind == "usi":
        argv = shlex.split(target)
        if not argv or shutil.which(argv[0]) is None:
            raise TeacherError(f"teacher '{text}': no engine at '{argv[0] if argv else target}'")
    spec = TeacherSpec(kind, target.strip(), options, text)
    _settings(spec)  # numbers that do not parse are reported now, not in a worker
    return spec


def _settings(spec: TeacherSpec) -> dict:
    """Keyword arguments of the adapter's constructor."""
    from dlzero.teacher.usi import OUR_KEYS

    try:
        if spec.kind == "onnx":
            names = {"model": "model", "batch": "batch_size", "threads": "threads", "temperature": "temperature"}
            return {names[k]: MINIOSL_KEYS[k](v) for k, v in spec.options.items()}
        ours = {k: v for k, v in spec.options.items() if k in OUR_KEYS}
        kwargs: dict = {"options": {k: v for k, v in spec.options.items() if k not in OUR_KEYS}}
        if "go" in ours:
            kwargs["go"] = ours["go"]
        for key, arg in (("eval_scale", "eval_scale"), ("temperature", "temperature"), ("timeout", "timeout_s")):
            if key in ours:
                kwargs[arg] = float(ours[key])
        return kwargs
    except ValueError as exc:
        raise TeacherError(f"teacher '{spec.text}': {exc}") from None


def open_teacher(spec: TeacherSpec | str) -> Teacher:
    """The adapter a spec names (engines start on their first position, networks load now)."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    if spec.kind == "usi":
        from dlzero.teacher.usi import UsiTeacher

        return UsiTeacher(spec.target, **_settings(spec))
    from dlzero.teacher.onnx_miniosl import MinioslTeacher

    return MinioslTeacher(**_settings(spec))
