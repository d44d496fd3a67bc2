"""The `dlzero` subcommands, one module each.

Each module listed in `COMMAND_MODULES` defines `register(subparsers)`, which adds its parser and
sets `func=run` on it; `run(args) -> int` does the work and keeps heavy imports (torch, onnxruntime)
inside, so that `dlzero --help` stays fast. This package is the CLI layer: the only place (with `dlzero.loop`)
that may import `selfplay` and `train`.
"""

COMMAND_MODULES: tuple[str, ...] = (
    "init_model",
    "export",
    "bench",
    "import_records",
    "loop",
    "usi",
    "bestmove",
    "analyze",
    "selfplay",
    "gate",
    "rate",
    "train",
)
