"""`dlzero networks list|show|verify`: the networks that ship with dlzero (dlzero.networks, docs/networks.md).

`list` and `show` read manifests only (no torch, no onnxruntime: quick); `verify` also checks each file against
its manifest and loads it as the engine would, so a network that verifies is one the commands can play with.
"""

from __future__ import annotations

import argparse
import json

from dlzero.config import ModelConfig
from dlzero.errors import DlzeroError, NetworkError
from dlzero.networks import ENV_DIR, Network, check_file, default_network, find_network, load_networks, networks_dir


def register(sub) -> None:
    p = sub.add_parser("networks", help="the networks that ship with dlzero: list, show, verify",
                       description=f"The networks that ship with dlzero (or those in ${ENV_DIR}); "
                                   "docs/networks.md describes their manifests.")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("list", help="name, date, architecture, size and headline strength of each network")
    show = actions.add_parser("show", help="a network's manifest, as JSON")
    show.add_argument("name", nargs="?", help="the network (default: the default network)")
    verify = actions.add_parser("verify", help="check every file's size and sha256, and that it loads")
    verify.add_argument("name", nargs="?", help="one network (default: all)")
    p.set_defaults(func=run)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _list(networks: list[Network]) -> None:
    if not networks:
        print(f"no networks in {networks_dir()} (docs/networks.md says how to add one)")
        return
    try:
        default, problem = default_network(networks), None
    except NetworkError as exc:  # `list` is how one finds out which: it lists; the commands that play it refuse
        default, problem = None, str(exc)
    rows = [("", "NAME", "DATE", "ARCH", "SIZE", "STRENGTH")]
    rows += [("*" if net is default else "!" if problem and net.default else "", net.name, net.date.isoformat(),
              net.arch, _megabytes(net.size), net.headline()) for net in networks]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    print(f"networks in {networks_dir()}:")
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    print("STRENGTH is each network's first measured match; `dlzero networks show NAME` has them all, in full")
    if problem is None:
        print("* the default network: bestmove, usi, analyze, review and match play it when given no model")
    else:
        print(f"! no default network: {problem}; until then bestmove, usi, analyze, review and match need --model")


def _onnx_config(net: Network, role: str) -> tuple[ModelConfig, str]:
    """Load an ONNX file as the engine would (onnxruntime, the CPU), evaluate the starting position, and read the
    model config from its header; for the int8 file, its quantization report must agree with the manifest."""
    import cshogi
    import numpy as np

    from dlzero.config import InferenceConfig
    from dlzero.encoding import encode_position
    from dlzero.inference.onnx_backend import OnnxEvaluator
    from dlzero.model.checkpoint import check_header
    from dlzero.model.export import METADATA_KEY

    path = net.files[role].path
    evaluator = OnnxEvaluator(path, InferenceConfig(device="cpu", threads=1))
    try:
        policy, value = evaluator.evaluate(encode_position(cshogi.Board())[None])
        header = evaluator.session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
        report = evaluator.quant_report
    finally:
        evaluator.close()
    if not (np.isfinite(policy).all() and np.isfinite(value).all()):
        raise NetworkError(f"network {net.name}: {path.name} evaluates the starting position to NaN or infinity")
    if header is None:
        raise NetworkError(f"network {net.name}: {path.name} has no '{METADATA_KEY}' header (make it with "
                           "`dlzero export`)")
    note = "loads in onnxruntime"
    if role == "int8":
        passed = net.int8_gate is not None and net.int8_gate.passed
        if report is None or report.accepted != passed:
            found = "no int8 report" if report is None else f"an int8 report that says {report.summary()}"
            raise NetworkError(f"network {net.name}: {path.name} holds {found}, but the manifest says the gate "
                               f"{'passed' if passed else 'failed'}")
        note += f", {report.summary()}"
    return check_header(json.loads(header), path)[0], note


def _loads(net: Network, role: str) -> str:
    """Load `net`'s `role` file; it must hold the manifest's architecture. Returns what was checked, in words."""
    path = net.files[role].path
    if role == "weights":
        from dlzero.model.checkpoint import load_model_file

        model_cfg, note = load_model_file(path)[0].cfg, "loads in torch"
    else:
        model_cfg, note = _onnx_config(net, role)
    if model_cfg != net.architecture:
        raise NetworkError(f"network {net.name}: {path.name} holds a {model_cfg.blocks}x{model_cfg.channels} network "
                           f"({model_cfg}), its manifest's architecture is {net.architecture}")
    return note


def _verify(networks: list[Network]) -> None:
    for net in networks:
        for role, entry in net.files.items():
            check_file(net, role)
            try:
                note = _loads(net, role)
            except NetworkError:
                raise
            except DlzeroError as exc:  # the loaders' own errors, e.g. a corrupt ONNX file
                raise NetworkError(f"network {net.name}: {exc}") from None
            print(f"{net.name}: {role} {entry.path.name}: {entry.size} bytes, sha256 ok, {note}")
        print(f"{net.name}: ok")


def run(args: argparse.Namespace) -> int:
    networks = load_networks()
    if args.action == "list":
        _list(networks)
    elif args.action == "show":
        net = find_network(args.name, networks) if args.name else default_network(networks)
        if net is None:
            raise NetworkError(f"no networks in {networks_dir()}")
        print(json.dumps(net.raw, indent=2, ensure_ascii=False))
    else:
        chosen = [find_network(args.name, networks)] if args.name else networks
        if not chosen:
            print(f"no networks in {networks_dir()}: nothing to verify")
        _verify(chosen)
    return 0
