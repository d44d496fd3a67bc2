"""A training segment given in minutes instead of steps (`dlzero train --minutes`, `dlzero loop --init-minutes`).

Why: a cosine schedule needs its length in steps before it starts, but what a user has is wall time
("an hour for the teacher stage"), and the step time differs 2x between CPUs (bf16 instructions or
not) and 20x between a CPU and a GPU. So the segment trains its first `PROBE_END` steps at the start
of the schedule (where the cosine is flat: 50 steps of thousands move the LR by less than 0.01 %),
times those after the first `PROBE_START` (oneDNN and CUDA warm up in the first steps), and then fixes
its step count for the minutes left. From then on it is an ordinary segment: the step count is saved in
its checkpoint, so a resumed run keeps the schedule it started (it does not re-time itself).

The decision is taken at a fixed step, not at a fixed time, so that every DDP rank takes it at the same
step; rank 0's timing is broadcast. Loading data, checkpoints after the probe and the held-out
evaluation are not in the budget.
"""

from __future__ import annotations

import time

PROBE_START = 10  # steps before the timing starts
PROBE_END = 50  # the step at which the step count is fixed; a budget always trains at least this many
UNTIMED_STEPS = 10**9  # a segment's provisional step count until it is timed (the cosine is flat there)


class StepBudget:
    """Times the first steps of a segment of `seconds` and says how many steps fit."""

    def __init__(self, seconds: float, first_step: int) -> None:
        self.seconds = seconds
        self.first_step = first_step  # a resumed segment starts its probe where it resumed
        self.started = time.perf_counter()
        self.timed_from: float | None = None

    def decide(self, step: int) -> tuple[int, float] | None:
        """(steps of the segment, seconds a step) at the end of the probe, else None."""
        done = step - self.first_step
        if done == PROBE_START:
            self.timed_from = time.perf_counter()
            return None
        if done != PROBE_END or self.timed_from is None:
            return None
        now = time.perf_counter()
        per_step = (now - self.timed_from) / (PROBE_END - PROBE_START)
        left = self.seconds - (now - self.started)
        return step + max(0, int(left / per_step)), per_step
