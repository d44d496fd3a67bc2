"""A training segment given in minutes instead of steps (`dlzero train --minutes`, `dlzero loop --init-minutes`).

Why: a cosine schedule needs its length in steps before it starts, but what a user has is wall time
("an hour for the teacher stage"), and the step time differs 2x between CPUs (bf16 instructions or
not) and 20x between a CPU and a GPU. So the segment trains its first `PROBE_END` steps at the start
of the schedule (where the cosine is flat: 50 steps of thousands move the LR by less than 0.01 %),
times those after the first `PROBE_START` (oneDNN and CUDA warm up in the first steps), and fixes its
step count for the time left. The speed of the first steps is not the speed of the whole run (on a
2-core VM a 35-minute warm start timed at 224 ms a step averaged 250), so the count is fitted again
every `REFIT_EVERY` steps from the mean speed since the timing began: the error left at the end is
that of the last few hundred steps, and the cosine's small jumps at each refit do not matter. The
steps, the budget and the seconds spent are in the segment's checkpoint, so a resumed run goes on with
the time it has left.

Decisions are taken at fixed steps, not at fixed times, so that every DDP rank takes them at the same
step; rank 0's are broadcast. Loading data and the held-out evaluation are not in the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable

PROBE_START = 10  # steps before the timing starts
PROBE_END = 50  # the step at which the step count is first fixed; a budget always trains at least this many
REFIT_EVERY = 250  # steps between later fits
UNTIMED_STEPS = 10**9  # a segment's provisional step count until it is timed (the cosine is flat there)


class StepBudget:
    """Times the steps of a segment that has `seconds` in all, `spent` of them before this process
    started on it at step `first_step`, and says how many steps it can train."""

    def __init__(self, seconds: float, spent: float, first_step: int,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # seconds; tests give a clock of their own
        self.left = seconds - spent
        self.spent_before = spent
        self.first_step = first_step
        self.started = clock()
        self.timed_from: tuple[int, float] | None = None  # (step, time) where the timing began

    def spent(self) -> float:
        """Seconds of the budget spent so far, this process's and those before it."""
        return self.spent_before + self.clock() - self.started

    def decide(self, step: int) -> tuple[int, float] | None:
        """After each step (`step` done): (steps of the segment, mean seconds a step) at the end of the
        probe and every REFIT_EVERY steps after it, else None."""
        done = step - self.first_step
        if done == PROBE_START:
            self.timed_from = (step, self.clock())
            return None
        if self.timed_from is None or done < PROBE_END or (done - PROBE_END) % REFIT_EVERY:
            return None
        now = self.clock()
        per_step = (now - self.timed_from[1]) / (step - self.timed_from[0])
        left = self.left - (now - self.started)
        return step + max(0, int(left / per_step)), per_step
