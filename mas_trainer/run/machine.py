"""What machine played an evaluation: CPU, vector instructions, threads, library versions.

Results files record it because fp32 matrix products round differently on different kernels (AVX2,
AVX-512, AMX) and thread counts: on a near-tie a greedy token can change, and a run spread over
sessions (resumed chunks) may have been played on more than one machine. Wall times only compare
within one machine, too.
"""

from __future__ import annotations

import os
import platform
from typing import Any

# The CPU flags that pick the matrix kernels torch uses on x86 (others do not change the numbers).
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


def _cpu_info() -> tuple[str, list[str]]:
    """(model name, the :data:`VECTOR_FLAGS` this CPU has), from /proc/cpuinfo where there is one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read(200_000)
    except OSError:
        return platform.processor() or platform.machine() or "unknown", []
    name, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not name:
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return (name or platform.machine() or "unknown"), [f for f in VECTOR_FLAGS if f in flags]


def machine_facts() -> dict[str, Any]:
    """A small JSON-able description of this machine, as it plays an evaluation now."""
    import torch

    cpu, flags = _cpu_info()
    return {
        "cpu": cpu[:200],
        "cpu_flags": flags,
        "logical_cpus": int(os.cpu_count() or 1),
        "torch_threads": int(torch.get_num_threads()),
        "torch": str(torch.__version__)[:64],
        "python": platform.python_version(),
    }
