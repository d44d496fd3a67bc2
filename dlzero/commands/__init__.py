"""The `dlzero` subcommands, one module each.

Each module listed in `COMMAND_MODULES` defines `register(subparsers)`, which adds its parser and
sets `func=run` on it; `run(args) -> int` does the work and keeps heavy imports (torch, onnxruntime)
inside, so that `dlzero --help` stays fast. This package is wiring: which layer may import which is
checked by `tests/test_layers.py`.
"""

COMMAND_MODULES: tuple[str, ...] = (
    "init_model",
    "export",
    "networks",
    "bench",
    "import_records",
    "teach",
    "loop",
    "chain",
    "usi",
    "bestmove",
    "analyze",
    "review",
    "selfplay",
    "gate",
    "rate",
    "openings",
    "book",
    "match",
    "train",
    "score",
    "dashboard",
    "doctor",
)
