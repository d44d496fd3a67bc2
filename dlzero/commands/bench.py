"""`dlzero bench infer|search|selfplay|server|alphabeta|train`: figures for every speed target, as a table
or JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args

# `bench search` has its own search length, not a one-position search's `search.playouts`: the
# many-tree rows split it (each of `batch` trees gets playouts / batch), and a rate is only compared
# with rates measured at the same count.
SEARCH_PLAYOUTS = 2000


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks: inference, search, self-play, inference server")
    bsub = p.add_subparsers(dest="bench", metavar="WHAT")
    bsub.required = True

    pi = bsub.add_parser("infer", help="positions/s per backend and batch size, and the encoder's rate")
    add_config_args(pi)
    add_inference_args(pi, backend=False)
    pi.add_argument("--model", help=".pt or .onnx model (default: a random model of the config's shape)")
    pi.add_argument("--batch", type=_ints, default=[1, 8, 64, 256], help="comma-separated batch sizes")
    pi.add_argument("--backend", dest="backends", type=_names, default=["torch-eager", "torch", "onnx", "onnx-int8"],
                    help="comma-separated backends: torch-eager (no graph optimisation), torch, onnx, onnx-int8 "
                         "(quantized with inference.quantize.*, whatever its accuracy; the row gives top-1 "
                         "agreement with fp32 and its speed ratio to onnx fp32, timed interleaved)")
    pi.add_argument("--seconds", type=float, default=1.5, help="time per measurement")
    pi.add_argument("--json", action="store_true", help="one JSON object per line")
    pi.set_defaults(func=run_infer)

    pself = bsub.add_parser("selfplay", help="self-play positions/s and games/hour per games in lockstep (G); "
                            "--precision int8: with the int8 model")
    add_config_args(pself)
    add_inference_args(pself)
    pself.add_argument("--parallel", type=_ints, default=[1, 16, 64, 256], help="comma-separated G values")
    pself.add_argument("--moves", type=int, default=20, help="lockstep steps (plies per game slot) per G")
    pself.add_argument("--precisions", type=_names, default=None,
                       help="comma-separated precisions to compare in one run, e.g. fp32,int8 (default: "
                            "inference.precision)")
    pself.add_argument("--rounds", type=int, default=1,
                       help="with several precisions: alternate them this many times per G (fairer on a busy machine)")
    pself.add_argument("--json", action="store_true", help="one JSON object per line")
    pself.set_defaults(func=run_selfplay)

    psrv = bsub.add_parser("server", help="inference server: evaluations/s and mean batch with W worker processes")
    add_config_args(psrv)
    add_inference_args(psrv)
    psrv.add_argument("--model", help=".pt or .onnx model (default: a random model of the config's shape)")
    psrv.add_argument("--workers", type=_ints, default=[1, 2, 4], help="comma-separated worker counts")
    psrv.add_argument("--seconds", type=float, default=10.0, help="measurement window per worker count")
    psrv.add_argument("--max-batch", dest="server_max_batch", type=int, help="server.max_batch")
    psrv.add_argument("--max-wait-ms", dest="server_max_wait_ms", type=float, help="server.max_wait_ms")
    psrv.add_argument("--parallel", dest="games_in_parallel", type=int, metavar="G",
                      help="games each worker plays in lockstep (selfplay.games_in_parallel)")
    psrv.add_argument("--json", action="store_true", help="one JSON object per line")
    psrv.set_defaults(func=run_server)

    ps = bsub.add_parser("search", help="simulations/s and bytes a tree node: null evaluator, torch, onnx; one tree "
                         "and many")
    add_config_args(ps)
    add_inference_args(ps, backend=False)
    ps.add_argument("--model", help=".pt or .onnx model (default: a random model of the config's shape)")
    ps.add_argument("--evaluators", type=_names, default=["null", "torch", "onnx"],
                    help="comma-separated: null, torch, torch-eager, onnx")
    ps.add_argument("--batch", type=_ints, default=[1, 16, 64], help="comma-separated leaves per network call")
    ps.add_argument("--playouts", type=int, default=SEARCH_PLAYOUTS,
                    help="playouts per measurement (one tree; default %(default)s)")
    ps.add_argument("--algorithms", type=_names, default=None,
                    help="comma-separated root searches to compare in one run: puct, gumbel "
                         "(default: the config's search.algorithm)")
    ps.add_argument("--layouts", default=None,
                    help="comma-separated THREADSxSTREAMS to compare in one run: inference threads per network "
                         "call x calls in flight (search.eval_streams), e.g. 2x1,1x2 "
                         "(default: inference.threads x search.eval_streams)")
    ps.add_argument("--rounds", type=int, default=1,
                    help="repeat each measurement and report medians (the network is timed around every search)")
    ps.add_argument("--byoyomi", type=int, metavar="MS",
                    help="instead: playouts a move and each move's wall time at this byoyomi, `dlzero usi` with "
                         "Threads 1 and EvalStreams 1 on rating-suite positions (--model: default the shipped network)")
    ps.add_argument("--margins", type=_ints, default=None,
                    help="with --byoyomi: comma-separated ByoyomiMargin values compared in one run "
                         "(default: usi.byoyomi_margin_ms)")
    ps.add_argument("--positions", type=int, default=8, help="with --byoyomi: rating-suite positions searched")
    ps.add_argument("--side-by-side", action="store_true",
                    help="with --byoyomi: also two engines searching at once (two games on one machine)")
    ps.add_argument("--json", action="store_true", help="one JSON object per line")
    ps.set_defaults(func=run_search)
    _register_alphabeta(bsub)
    _register_train(bsub)


def _register_train(bsub) -> None:
    pt = bsub.add_parser("train", help="training steps/s per precision (train.amp) and memory layout "
                         "(train.channels_last), timed in turns")
    add_config_args(pt)
    pt.add_argument("--variants", type=_names, default=None,
                    help="comma-separated AMP/LAYOUT: AMP is train.amp (off, bf16, fp16 on CUDA, auto), LAYOUT "
                         "contiguous or channels_last; the first is the baseline of vs_first (default: fp32 and "
                         "bf16, each in both layouts)")
    pt.add_argument("--steps", type=int, default=5, help="steps per variant in each round")
    pt.add_argument("--rounds", type=int, default=3, help="rounds of turns (the row gives the median)")
    pt.add_argument("--json", action="store_true", help="one JSON object per line")
    pt.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from dlzero.bench.train import VARIANTS, bench_train

    variants = args.variants or list(VARIANTS)
    rows = _with_cpu(bench_train(config_from_args(args), variants, args.steps, args.rounds), args.json)
    _print_rows(rows, args.json, ["variant", "device", "computes_in", "batch", "ms_per_step", "samples_per_s",
                                  "vs_first", "threads"])
    return 0


def _register_alphabeta(bsub) -> None:
    pa = bsub.add_parser("alphabeta", help="the alpha-beta anchor: positions/s, ms per move, "
                         "games against random and the rung before")
    add_config_args(pa)
    pa.add_argument("--nodes", type=_ints, default=[100, 1000, 10000], help="comma-separated node budgets")
    pa.add_argument("--games", type=int, default=20,
                    help="games of each rung against random and against the rung before")
    pa.add_argument("--json", action="store_true", help="one JSON object per line")
    pa.set_defaults(func=run_alphabeta)


def run_alphabeta(args: argparse.Namespace) -> int:
    from dlzero.bench.alphabeta import bench_alphabeta

    rows = bench_alphabeta(config_from_args(args), args.nodes, args.games)
    _print_rows(rows, args.json, ["rung", "wdl_vs_random", "wdl_vs_previous", "elo", "nodes_per_s", "ms_per_move",
                                  "mean_plies"])
    return 0


def _print_rows(rows, as_json: bool, columns: list[str]) -> None:
    if not as_json:
        print("  ".join(f"{c:>16}" for c in columns))
    for row in rows:
        if as_json:
            print(json.dumps(row), flush=True)
        else:
            print("  ".join(f"{row.get(c, ''):>16}" for c in columns), flush=True)


def _with_cpu(rows: Iterable[dict], as_json: bool) -> Iterable[dict]:
    """The CPU's speed-relevant flags beside the figures (int8 speed depends on VNNI, bf16 on BF16): a line above the
    table, or a `cpu_flags` field in every JSON row (so each row is self-contained)."""
    from dlzero.cpu import cpu_flags

    flags = cpu_flags()
    if not as_json:
        print(f"cpu flags: {flags}", flush=True)
        return rows
    return ({**row, "cpu_flags": flags} for row in rows)


def run_infer(args: argparse.Namespace) -> int:
    from dlzero.bench.infer import bench_encoder, bench_inference

    cfg = config_from_args(args)
    rows = _with_cpu(bench_inference(args.backends, args.batch, args.model, cfg, args.seconds), args.json)
    _print_rows(rows, args.json, ["backend", "batch", "positions_per_s", "ms_per_batch", "vs_onnx_fp32",
                                  "top1_vs_fp32", "value_mae"])
    enc = bench_encoder()
    if args.json:
        print(json.dumps({"backend": "encoder", "batch": 256, "positions_per_s": round(enc, 1)}))
    else:
        print(f"encoder: {enc:,.0f} positions/s (100 planes, mid-game positions)", file=sys.stdout)
    return 0


def run_server(args: argparse.Namespace) -> int:
    from dlzero.bench.server import bench_server

    cfg = config_from_args(args, {"server_max_batch": "server.max_batch", "server_max_wait_ms": "server.max_wait_ms",
                                  "games_in_parallel": "selfplay.games_in_parallel"})
    rows = bench_server(cfg, args.workers, args.seconds, args.model)
    _print_rows(rows, args.json, ["workers", "evals_per_s", "mean_batch", "busy", "inference_only_per_s",
                                  "server_vs_inference", "positions_per_s"])
    return 0


def run_search(args: argparse.Namespace) -> int:
    from dlzero.bench.search import bench_search, parse_layouts

    cfg = config_from_args(args)
    if args.byoyomi is not None:
        from dlzero.bench.clock import bench_byoyomi

        margins = args.margins or [cfg.usi.byoyomi_margin_ms]
        rows = _with_cpu(bench_byoyomi(cfg, args.model, args.byoyomi, margins, args.positions, args.side_by_side,
                                       args.rounds), args.json)
        _print_rows(rows, args.json, ["byoyomi", "margin", "engines", "moves", "playouts_per_move",
                                      "time_ms_median", "time_ms_p95", "time_ms_max", "late", "search_ms_max",
                                      "after_ms_max"])
        return 0
    rows = _with_cpu(bench_search(args.evaluators, args.batch, args.model, cfg, args.playouts,
                                  algorithms=args.algorithms or [cfg.search.algorithm],
                                  layouts=parse_layouts(args.layouts) if args.layouts else None, rounds=args.rounds),
                     args.json)
    _print_rows(rows, args.json, ["evaluator", "algorithm", "batch", "trees", "layout", "sims_per_s",
                                  "inference_only_per_s", "search_vs_inference", "vs_best_inference",
                                  "tree_bytes_per_node", "rss_bytes_per_node"])
    return 0


def run_selfplay(args: argparse.Namespace) -> int:
    from dlzero.bench.selfplay import bench_selfplay

    cfg = config_from_args(args)
    backend = args.backend if args.backend not in (None, "auto") else "onnx"
    rows = _with_cpu(bench_selfplay(cfg, args.parallel, args.moves, backend, precisions=args.precisions,
                                    rounds=args.rounds), args.json)
    _print_rows(rows, args.json, ["config", "precision", "parallel", "positions_per_s", "vs_first", "games_per_hour",
                                  "game_length", "eval_share"])
    return 0
