"""The weight dtypes a policy can load in (``model_init_kwargs['dtype']``, ``role_dtype``, ``mas-eval --dtype``).

float32 is the default everywhere. bf16 halves memory and is ~2x faster on CPUs with AMX or AVX-512 BF16
and on GPUs, but ~50x slower on a CPU without bf16 instructions (docs/PERFORMANCE.md), and its greedy
tokens differ from fp32's: results in another dtype are other results (the leaderboard keeps them apart).
"""

MODEL_DTYPES = ("float32", "bfloat16", "float16")
