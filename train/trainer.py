"""The trainer: optimiser, LR schedule, AMP, EMA, DDP, checkpoints and metrics around PolicyValueNet.

Losses (dlshogi's, adapted to a tanh value head):

    policy  soft cross-entropy  -sum_a pi(a) log softmax(logits)(a), pi = normalised visit counts
    value   BCE-with-logits of the raw value logit: win rate q = sigmoid(2x) = (tanh(x) + 1) / 2
            against the blended target (1 - λ)·z + λ·sigmoid(eval / 756); loss = policy + w·value
            (w = `value_weight`: below 1 the value head memorises a small window's results less),
            weight decay in the optimiser; a row without a value target (a move-capped game's,
            `value_of_capped_games: drop`) adds no value loss

Why BCE-with-logits on the logit x, not BCE on the tanh output: both are the same function where
tanh is not saturated, but once tanh(x) rounds to exactly +-1 (|x| >= ~9 in fp32, ~4 in bf16) BCE
clamps its log at -100 and its gradient through tanh is exactly 0, so a confidently wrong value could
never be corrected. The logit form has gradient 2(sigmoid(2x) - target) everywhere (as dlshogi's).
The model computes its value head in fp32 outside autocast, so bf16 never rounds the logit either.
MSE on v is no alternative: its gradient carries a 1 - v² factor.

KataGo's switches (both off by default): `aux_reply_weight` adds that weight times the cross-entropy
of the opponent's-reply head (train.reply; plies without a reply count 0), and `surprise_weight`
scales each sample's loss by its policy surprise (train.surprise). Logged losses stay unweighted.

Arithmetic: `train.amp` autocasts the network to bf16 (auto: on CUDA, and on CPUs with bf16
instructions, dlzero.cpu) while weights, optimiser state and losses stay fp32, and `train.channels_last`
trains in the NHWC layout the fast convolution kernels want; together 1.9x the samples/s of fp32 NCHW
on a 2-core AVX512_BF16 CPU (docs/benchmarks/train-speed.md). Model files are fp32 and NCHW either way.

Schedule: `lr` constant, or cosine from `lr` towards 0 over each segment (a generation in the loop,
the whole run in supervised mode, so each candidate is taken at a low LR), times a linear warmup over
the first `warmup_steps` steps of the whole run. The loop's generations take `train.lr_schedule`,
supervised training (a warm start, `dlzero train --hcpe`) `train.supervised_lr_schedule`. The LR is
a pure function of the step counters in the checkpoint, so the schedule needs no state of its own. A
supervised segment can be given in minutes instead of steps: it times its first steps and then fixes
its length (dlzero.train.budget).

Determinism: with a fixed seed and dataset on the CPU, a run resumed from a checkpoint takes exactly
the steps an uninterrupted run takes (the sampler is a function of seed and cursor; model, optimiser,
scaler, EMA and counters are restored). A segment given in minutes is the exception by design: its
length follows the clock.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from dlzero.config import TrainConfig
from dlzero.cpu import cpu_flags, native_bf16
from dlzero.errors import ConfigError, ModelFileError
from dlzero.model import PolicyValueNet
from dlzero.model.checkpoint import load_state
from dlzero.train.budget import UNTIMED_STEPS, StepBudget
from dlzero.train.buffer import BatchDecoder, PositionBuffer, TrainingBatch
from dlzero.train.distributed import DistInfo, broadcast
from dlzero.train.meters import Meter, MetricsLog, summarise
from dlzero.train.reply import TrainingNet, reply_loss
from dlzero.train.sampler import EpochSampler, MixSampler
from dlzero.train.surprise import surprise_weights
from dlzero.train.train_state import save_checkpoint, set_rng_state

log = logging.getLogger(__name__)


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """Autocast dtype for `train.amp`.

    auto: bf16 on CUDA (fp16 where bf16 is unsupported), and on a CPU with bf16 instructions
    (AVX512_BF16, AMX: there a 5x64 step ran 1.7x faster than fp32, docs/benchmarks/train-speed.md);
    off on other CPUs, where oneDNN emulates bf16 (not measured; fp32 is the safe side there).
    """
    if amp == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if native_bf16() else None
    if amp == "off":
        return None
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError("train.amp=fp16 needs CUDA; on the CPU use bf16 or off")
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]


@functools.cache
def _announce(device: str, amp: str, dtype: str, layout: str) -> None:
    """One log line per process and setting: what the arithmetic runs in, and why (train.amp=auto decides
    by the CPU's flags, so the same config trains in bf16 on one machine and fp32 on another)."""
    why = f"; this CPU has {cpu_flags()}" if amp == "auto" and device == "cpu" else ""
    log.info("training on %s in %s (train.amp=%s%s), %s layout", device, dtype, amp, why, layout)


def make_optimizer(params: Any, cfg: TrainConfig) -> torch.optim.Optimizer:
    """SGD with Nesterov momentum (dlshogi's default) or AdamW; weight decay lives here."""
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0,
                           weight_decay=cfg.weight_decay)


def lr_at(cfg: TrainConfig, global_step: int, seg_step: int, seg_steps: int) -> float:
    """The learning rate of a step (see the module docstring)."""
    lr = cfg.lr
    if cfg.lr_schedule == "cosine":
        lr *= 0.5 * (1.0 + math.cos(math.pi * min(seg_step, seg_steps) / max(seg_steps, 1)))
    if global_step < cfg.warmup_steps:
        lr *= (global_step + 1) / cfg.warmup_steps
    return lr


def policy_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample soft cross-entropy."""
    return -(target * F.log_softmax(logits, dim=1)).sum(dim=1)


def value_loss(value_logit: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample BCE between the win rate sigmoid(2x) of the value logit x and a win-rate target."""
    return F.binary_cross_entropy_with_logits(2.0 * value_logit, target, reduction="none")


def masked_value_loss(value_logit: torch.Tensor, target: torch.Tensor, batch: TrainingBatch) -> torch.Tensor:
    """Per-sample `value_loss` against `target`, 0 on the rows of `batch` without a value target."""
    loss = value_loss(value_logit, target)
    return loss if batch.has_value is None else loss * batch.has_value


def value_rows(batch: TrainingBatch) -> torch.Tensor | None:
    """Rows of `batch` with a value target (None: every row), the count the value loss is averaged over."""
    return None if batch.has_value is None else batch.has_value.sum()


def batch_stats(logits: torch.Tensor, value_logit: torch.Tensor, batch: TrainingBatch) -> tuple[torch.Tensor, ...]:
    """(policy loss sum, value loss sum, top-1 hits, value sign hits on decisive games, decisive games,
    rows with a policy target). A value-only row (train.value_plies) has a zero policy target, so it adds
    nothing to the policy loss, and it is kept out of the top-1 count; a row without a value target adds
    nothing to the value loss and is not a decisive game."""
    pl = policy_loss(logits, batch.policy).sum()
    vl = masked_value_loss(value_logit, batch.value, batch).sum()
    hit = logits.argmax(dim=1) == batch.policy.argmax(dim=1)
    policies = torch.tensor(len(hit), device=hit.device)
    if batch.has_policy is not None:
        hit, policies = hit & batch.has_policy, batch.has_policy.sum()
    decisive = batch.result != 0.5
    if batch.has_value is not None:
        decisive = decisive & batch.has_value
    vhits = (((value_logit > 0) == (batch.result > 0.5)) & decisive).sum()
    return pl, vl, hit.sum(), vhits, decisive.sum(), policies


class EMA:
    """Exponential moving average of every float tensor of the state dict (BN statistics included).

    The decay ramps up as min(decay, (1 + n) / (10 + n)) over the first updates, so a young average
    is not dominated by the initial weights.
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for k, v in model.state_dict().items():
            if v.is_floating_point():
                self.state[k].lerp_(v, 1.0 - d)
            else:
                self.state[k].copy_(v)
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "state": self.state}

    def load_state_dict(self, data: dict[str, Any]) -> None:
        self.updates = int(data["updates"])
        for k, v in data["state"].items():
            self.state[k].copy_(v)


@dataclass
class Segment:
    """A stretch of training with one dataset and one schedule: a generation, or a supervised run."""

    generation: int
    steps: int
    seed: int
    step: int = 0
    cursor: int = 0
    plan: dict | None = None  # the replay window (train.dataset.WindowPlan as a dict)
    parent: str | None = None  # the model whose self-play made the newest data
    done: bool = False
    # a segment given in time (dlzero.train.budget): its seconds in all and those spent at the last
    # checkpoint; `steps` is provisional until the first steps are timed, then fitted to the time left
    seconds: float | None = None
    spent: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Segment:
        return cls(**data)


class Trainer:
    """Trains one PolicyValueNet in this process (one DDP replica when `info.world` > 1)."""

    def __init__(self, model: PolicyValueNet, cfg: TrainConfig, device: torch.device,
                 info: DistInfo | None = None) -> None:
        self.cfg = cfg
        self.device = device
        self.info = info or DistInfo()
        if cfg.batch_size % self.info.world:
            raise ConfigError(f"train.batch_size {cfg.batch_size} must be divisible by the {self.info.world} "
                              "training processes")
        # channels_last: the layout oneDNN's and cuDNN's fast convolutions want; the exported copy
        # goes back to the standard layout (export_model)
        self.memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format)
        self.train_net = TrainingNet(self.model, reply=cfg.aux_reply_weight > 0).to(device)
        self.net: torch.nn.Module = self.train_net
        if self.info.enabled:
            ids = [device.index] if device.type == "cuda" else None
            self.net = DistributedDataParallel(self.train_net, device_ids=ids)
        self.optimizer = make_optimizer(self.train_net.parameters(), cfg)
        self.amp = amp_dtype(cfg.amp, device)
        self._logged_steps: int | None = None  # a timed segment's step count as last logged (_fit_steps)
        if self.info.is_main:
            _announce(device.type, cfg.amp, str(self.amp or torch.float32).removeprefix("torch."),
                      "channels-last" if cfg.channels_last else "standard (NCHW)")
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp == torch.float16)
        self.ema = EMA(self.model, cfg.ema_decay) if cfg.ema else None
        self.global_step = 0
        self.meter = Meter(device)

    # -- one optimisation step ------------------------------------------------------------------
    def step(self, batch: TrainingBatch, lr: float) -> None:
        """Forward, loss, backward, clip, update; adds the batch's metrics to the meter."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.net.train()
        with torch.autocast(self.device.type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            planes = batch.planes.contiguous(memory_format=self.memory_format)
            logits, value, reply = self.net(planes)  # value: the raw logit (train.reply.TrainingNet)
        logits, value = logits.float(), value.float()
        pl, vl, hits, vhits, decisive, policies = batch_stats(logits, value, batch)
        n = len(batch.value)
        vw = self.cfg.value_weight
        loss = (pl + vw * vl) / n
        rl = replies = None
        if reply is not None or self.cfg.surprise_weight > 0:
            per_sample = policy_loss(logits, batch.policy) + vw * masked_value_loss(value, batch.value, batch)
            if reply is not None:
                per_reply = reply_loss(reply.float(), batch.reply)
                per_sample = per_sample + self.cfg.aux_reply_weight * per_reply
                rl, replies = per_reply.sum(), (batch.reply >= 0).sum()
            loss = (surprise_weights(logits, batch.policy, self.cfg.surprise_weight) * per_sample).sum() / n
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.cfg.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.train_net.parameters(), self.cfg.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.ema is not None:
            self.ema.update(self.model)
        self.meter.add(pl, vl, hits, n, vhits, decisive, rl, replies, policies, value_rows(batch))
        self.global_step += 1

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer_name": self.cfg.optimizer,
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "reply_head": self.train_net.reply.state_dict() if self.train_net.reply is not None else None,
            "global_step": self.global_step,
        }

    def load_state_dict(self, state: dict[str, Any], path: Path) -> None:
        """Restore from a checkpoint's `trainer` part (checked to fit; errors name `path`)."""
        load_state(self.model, state.get("model"), path)
        head = self.train_net.reply
        same_params = (head is not None) == (state.get("reply_head") is not None)
        if head is not None and state.get("reply_head") is not None:
            load_state(head, state["reply_head"], path)
        if not same_params:  # train.aux_reply_weight switched on or off: the optimizer's parameters changed
            log.warning("%s: the reply head was switched %s; the optimizer state starts afresh", path,
                        "on" if head is not None else "off")
        elif state.get("optimizer_name") == self.cfg.optimizer:
            # Keep the momentum/moment buffers but the config's hyperparameters (it may have changed).
            settings = [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]
            try:
                self.optimizer.load_state_dict(state["optimizer"])
            except (ValueError, KeyError) as exc:
                raise ModelFileError(f"{path}: optimizer state does not fit the model ({exc})") from None
            for group, setting in zip(self.optimizer.param_groups, settings, strict=True):
                group.update(setting)
        else:
            log.warning("%s: optimizer changed from %s to %s; its state starts afresh", path,
                        state.get("optimizer_name"), self.cfg.optimizer)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None:
            if state.get("ema"):
                self.ema.load_state_dict(state["ema"])
            else:  # EMA switched on mid-run: start it from the current weights
                self.ema = EMA(self.model, self.cfg.ema_decay)
        self.global_step = int(state["global_step"])

    def export_model(self) -> PolicyValueNet:
        """A CPU copy in eval mode of the weights to publish: the EMA when on, else the live weights."""
        out = copy.deepcopy(self.model).to("cpu", memory_format=torch.contiguous_format)
        if self.ema is not None:
            out.load_state_dict({k: v.cpu() for k, v in self.ema.state.items()})
        return out.eval()

    def _reduced_totals(self) -> dict[str, float]:
        sums = self.meter.sums.clone()
        if self.info.enabled:
            dist.all_reduce(sums)
        return dict(zip(self.meter.totals().keys(), sums.tolist(), strict=True))

    def save(self, path: Path, seg: Segment) -> None:
        """Checkpoint (every rank takes part in the metric reduction; rank 0 writes)."""
        meter = list(self._reduced_totals().values())
        if self.info.is_main:
            save_checkpoint(path, self.model.cfg, {"trainer": self.state_dict(), "segment": asdict(seg),
                                                   "meter": meter})

    def restore(self, payload: dict[str, Any], path: Path) -> Segment:
        """Load a checked checkpoint payload (see train.train_state.load_checkpoint); returns its segment."""
        self.load_state_dict(payload["trainer"], path)
        self.meter.load(payload["meter"] if self.info.is_main else [0.0] * len(payload["meter"]))
        set_rng_state(payload["rng"])
        return Segment.from_dict(payload["segment"])

    # -- the loop -------------------------------------------------------------------------------
    def fit(self, buf: PositionBuffer, seg: Segment, checkpoint: Path | None, metrics: MetricsLog | None,
            progress: bool = True, desc: str = "",
            sampler: EpochSampler | MixSampler | None = None) -> dict[str, float]:
        """Train `seg` to its end from its current step; returns the metrics of the last logged interval.

        Checkpoints every `checkpoint_every` steps and after the last step; logs a row every
        `log_every` steps and after the last step. `sampler`: the batches (default: epochs over all of
        `buf`; a window with teacher data mixes them in, train.dataset.WindowPlan.sampler).
        """
        cfg = self.cfg
        sampler = sampler or EpochSampler(len(buf), seg.seed)
        decoder = BatchDecoder(cfg.batch_size // self.info.world, pin_memory=self.device.type == "cuda")
        untimed = seg.steps == UNTIMED_STEPS  # a timed segment's count is known once its first steps are timed
        bar = tqdm(total=None if untimed else seg.steps, initial=seg.step, desc=desc or f"train gen {seg.generation}",
                   file=sys.stderr, disable=not (progress and self.info.is_main), dynamic_ncols=True)
        summary: dict[str, float] = {}
        budget = StepBudget(seg.seconds, seg.spent, seg.step) if seg.seconds is not None else None
        t0, s0 = time.perf_counter(), seg.step
        try:
            while seg.step < seg.steps:
                idx = sampler.batch(seg.cursor, cfg.batch_size, self.info.rank, self.info.world)
                lr = lr_at(cfg, self.global_step, seg.step, seg.steps)
                self.step(decoder.decode(buf, idx).to(self.device), lr)
                seg.step += 1
                seg.cursor += cfg.batch_size
                bar.update(1)
                if budget is not None and (decision := budget.decide(seg.step)) is not None:
                    self._fit_steps(seg, *broadcast(decision, self.info))
                    bar.total = seg.steps
                    bar.refresh()
                last = seg.step == seg.steps
                if seg.step % cfg.log_every == 0 or last:
                    rate = (seg.step - s0) * cfg.batch_size / max(time.perf_counter() - t0, 1e-9)
                    summary = self._log(seg, lr, rate, metrics)
                    bar.set_postfix(pl=f"{summary['policy_loss']:.3f}", vl=f"{summary['value_loss']:.3f}",
                                    acc=f"{summary['policy_acc']:.2f}")
                    t0, s0 = time.perf_counter(), seg.step
                if checkpoint is not None and (seg.step % cfg.checkpoint_every == 0 or last):
                    if budget is not None:
                        seg.spent = budget.spent()
                    self.save(checkpoint, seg)
        finally:
            bar.close()
        return summary

    def _fit_steps(self, seg: Segment, steps: int, per_step: float) -> None:
        """Fit a timed segment's length to the time it has left (dlzero.train.budget): logged the first
        time, and again once the count has moved more than 2 % from the one last logged (each refit may
        move it less: a slow drift of 5 % over many refits was otherwise never in the log)."""
        # the count to compare with: none the first time; after a resume, the one the checkpoint kept
        base = None if seg.steps == UNTIMED_STEPS else (self._logged_steps or seg.steps)
        if base is None or abs(steps - base) > 0.02 * base:
            log.info("%.1f minutes of training at %.0f ms a step: %d steps%s", (seg.seconds or 0.0) / 60,
                     per_step * 1000, steps, "" if base is None else f" (was {base}, at step {seg.step})")
            self._logged_steps = steps
        seg.steps = steps

    def _log(self, seg: Segment, lr: float, samples_per_s: float,
             metrics: MetricsLog | None) -> dict[str, float]:
        summary = summarise(self._reduced_totals())
        self.meter.reset()
        row = {"step": self.global_step, "generation": seg.generation, **summary, "lr": lr,
               "samples_per_s": samples_per_s}
        if metrics is not None and self.info.is_main:
            metrics.write(row)
        return row


@torch.no_grad()
def evaluate(model: PolicyValueNet, buf: PositionBuffer, batch_size: int,
             device: torch.device) -> dict[str, float]:
    """Losses and accuracies of `model` over every position of `buf` (eval mode, fp32).

    `value_loss` and `value_acc` score the value against the game's result alone, as held-out validation
    does (train.validation), so a figure on teacher data compares with the loop's and does not reward
    agreeing with the teacher's eval; `value_loss_target` scores it against the training target (the
    result blended with the eval by `train.val_lambda`; the same figure when λ is 0). Positions without a
    value target (move-capped games, `train.value_of_capped_games: drop`) count in the policy figures only.
    """
    model = model.to(device).eval()
    decoder = BatchDecoder(batch_size)
    meter = Meter(device)
    target_loss = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, len(buf), batch_size):
        batch = decoder.decode(buf, np.arange(start, min(start + batch_size, len(buf)))).to(device)
        logits, value = model(batch.planes, value_logit=True)
        logits, value = logits.float(), value.float()
        target_loss += masked_value_loss(value, batch.value, batch).sum().double()
        by_result = replace(batch, value=batch.result)
        pl, vl, hits, vhits, decisive, policies = batch_stats(logits, value, by_result)
        meter.add(pl, vl, hits, len(batch.value), vhits, decisive, policies=policies, values=value_rows(batch))
    totals = meter.totals()
    figures = summarise(totals)
    figures["value_loss_target"] = target_loss.item() / totals["values"] if totals["values"] else float("nan")
    return figures
