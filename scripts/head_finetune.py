"""Fine-tune one head of a network on hcpe3 data, everything else frozen (an ablation, not a product command).

    python scripts/head_finetune.py --init default --head policy --hcpe TRAIN.hcpe3... --val VAL.hcpe3... \
        --out P.pt [--steps 300] [--lr 0.002] [--val-lambda 0] [--target-power 1]

The loop's candidates lost their gates against the shipped network although every held-out figure but the value
loss moved the right way (docs/benchmarks/loop-from-shipped.md, "Offline ablations"). Training one head with the
trunk and the other head frozen (their batch-norm statistics too) tells the two heads' shares apart: a policy-head
candidate evaluates every position exactly as its parent does, a value-head candidate orders moves exactly as its
parent does. `--target-power k` trains the policy on visits**k, normalised (k > 1: sharper targets), to test
whether visit targets only flatten the prior. SGD with Nesterov momentum and weight decay 1e-4, the trainer's
losses (`dlzero.train.trainer`), one thread; prints the held-out figures before and after, as `dlzero train` does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dlzero.model.checkpoint import load_model_file, read_payload  # noqa: E402
from dlzero.networks import default_network, find_network, load_networks  # noqa: E402
from dlzero.train.buffer import BatchDecoder  # noqa: E402
from dlzero.train.supervised import load_supervised  # noqa: E402
from dlzero.train.trainer import evaluate, masked_value_loss, policy_loss  # noqa: E402

HEADS = {"policy": "policy", "value": "value"}  # head -> the parameter-name prefix of its layers


def freeze_all_but(net: torch.nn.Module, prefix: str) -> list[torch.nn.Parameter]:
    """Make only `prefix`'s parameters trainable and keep every other batch-norm in eval mode (its statistics
    would otherwise drift with the new data); returns the trainable parameters."""
    for name, param in net.named_parameters():
        param.requires_grad_(name.startswith(prefix))
    net.train()
    for name, module in net.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d) and not name.startswith(prefix):
            module.eval()
    return [p for n, p in net.named_parameters() if n.startswith(prefix)]


def weights(name: str) -> Path:
    """The .pt file `name` names: a path, or a shipped network ('default' or its name) by its weights file."""
    if name.endswith(".pt"):
        return Path(name)
    networks = load_networks()
    network = default_network(networks) if name == "default" else find_network(name, networks)
    if network is None or "weights" not in network.files:
        raise SystemExit(f"--init {name}: no shipped network with .pt weights")
    return network.files["weights"].path


def figures(net: torch.nn.Module, buf) -> str:
    """The held-out figures `dlzero train` prints."""
    got = evaluate(net, buf, 256, torch.device("cpu"))
    return ", ".join(f"{k} {got[k]:.4f}" for k in ("policy_loss", "policy_acc", "value_loss", "value_acc"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init", default="default", help="a .pt file or a shipped network's name ('default')")
    parser.add_argument("--head", choices=sorted(HEADS), required=True)
    parser.add_argument("--hcpe", nargs="+", required=True, help="training hcpe3 files")
    parser.add_argument("--val", nargs="+", required=True, help="held-out hcpe3 files (other games)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--val-lambda", type=float, default=0.0, help="weight of the search's eval in the value "
                        "target (train.val_lambda)")
    parser.add_argument("--target-power", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    init = weights(args.init)
    net, _ = load_model_file(init)
    train = load_supervised(args.hcpe, args.val_lambda)
    held = load_supervised(args.val, args.val_lambda)
    print(f"{len(train):,} training positions, {len(held):,} held out; before: {figures(net, held)}", flush=True)
    prefix = HEADS[args.head]
    opt = torch.optim.SGD(freeze_all_but(net, prefix), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    decoder, rng = BatchDecoder(256), np.random.default_rng(args.seed)
    for step in range(args.steps):
        batch = decoder.decode(train, rng.integers(0, len(train), 256))
        logits, value = net(batch.planes, value_logit=True)
        if args.head == "policy":
            target = batch.policy ** args.target_power
            target = target / target.sum(1, keepdim=True).clamp_min(1e-12)
            rows = batch.has_policy.float()
            loss = (policy_loss(logits, target) * rows).sum() / rows.sum().clamp_min(1)
        else:
            loss = masked_value_loss(value, batch.value, batch).sum() / batch.has_value.sum().clamp_min(1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: {args.head} loss {loss.item():.4f}", flush=True)
    net.eval()
    payload = dict(read_payload(init))
    payload["state_dict"] = net.state_dict()
    tmp = args.out.with_name(args.out.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(args.out)
    print(f"wrote {args.out}: {args.steps} steps of the {args.head} head; after: {figures(net, held)}")


if __name__ == "__main__":
    main()
