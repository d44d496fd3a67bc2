"""What this CPU can do: the instruction sets that decide how fast int8 inference and bf16 training run.

Speed figures are printed beside these flags (machines differ: some have AVX-512 VNNI and BF16, some
only AVX2), and `train.amp=auto` trains in bf16 on a CPU only where it has bf16 instructions: there
oneDNN's bf16 convolutions ran 1.7x faster than fp32 (docs/benchmarks/train-speed.md); elsewhere
oneDNN emulates bf16 (not measured here), so auto keeps fp32 there.
"""

from __future__ import annotations

import functools
from pathlib import Path

# the flags that change a speed figure of dlzero's: int8 (VNNI, AMX) and bf16 (AVX512_BF16, AMX)
SPEED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


@functools.cache
def flag_set() -> frozenset[str] | None:
    """Every flag /proc/cpuinfo lists; None where there is no /proc/cpuinfo (not Linux)."""
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return None


def cpu_flags() -> str:
    """The speed-relevant flags this CPU has, e.g. 'avx2 avx512f avx512_vnni avx512_bf16'."""
    flags = flag_set()
    if flags is None:
        return "unknown (no /proc/cpuinfo)"
    return " ".join(f for f in SPEED_FLAGS if f in flags) or "none of avx2/avx512/vnni/bf16"


def native_bf16() -> bool:
    """Whether the CPU computes bf16 in hardware (AVX512_BF16 or AMX), so bf16 training pays on it."""
    return bool((flag_set() or frozenset()) & BF16_FLAGS)


def native_int8() -> bool:
    """Whether the CPU has int8 dot-product instructions (VNNI or AMX): there onnxruntime's int8 kernels ran about
    3x fp32 (docs/int8.md), so a shipped network plays its int8 file; elsewhere (not measured) its fp32 one."""
    return bool((flag_set() or frozenset()) & INT8_FLAGS)
