"""Decoder LLMs as onnxruntime-genai's model builder writes them, from random weights.

:func:`genai_decoder` makes what people deploy with ONNX Runtime GenAI: a Llama-architecture
checkpoint with random weights (``transformers.LlamaForCausalLM``, seeded with
``torch.manual_seed``) and a minimal tokenizer, written to a temporary folder and turned into
ONNX by ``python -m onnxruntime_genai.models.builder`` (offline: ``-i`` points at that folder;
``HuggingFaceTB/SmolLM2-135M`` only picks the Llama family's builder). The folder it fills holds
``model.onnx`` (the graph), ``model.onnx.data`` (the weights, external data),
``genai_config.json`` and the tokenizer files. Nothing is downloaded.

The graph is the builder's, contrib ops and all: ``com.microsoft`` ``MatMulNBits`` (int4) or
``MatMul`` (fp32), ``GroupQueryAttention`` with rotary embedding and past/present KV,
``SkipSimplifiedLayerNormalization`` and, at int4, a ``GatherBlockQuantized`` embedding.
Inputs ``input_ids`` ``[batch_size, sequence_length]``, ``attention_mask`` ``[batch_size,
total_sequence_length]`` and ``past_key_values.N.key`` / ``.value`` ``[batch_size, kv_heads,
past_sequence_length, kv_cache_dim]`` (``kv_cache_dim`` must be fed as ``head_size``); outputs
``logits`` ``[batch_size, sequence_length, vocab]`` and ``present.N.key`` / ``.value``.

=========  ===========================================================  ===========  =========
size       shape (:func:`llama_config`)                                  int4         build
=========  ===========================================================  ===========  =========
``small``  2 layers, hidden 64, 4 heads (head 16), 2 KV heads, FFN 128,  ~0.1 MB      seconds
           vocab 512, context 256
``deep``   ``small``'s widths at ``full``'s depth: 30 layers (60 KV      ~0.9 MB      seconds
           inputs, 60 KV outputs), hidden 64, 4 heads, 2 KV heads,
           FFN 128, vocab 512, context 256
``full``   SmolLM2-135M: 30 layers, hidden 576, 9 heads (head 64),        ~86 MB       a minute
           3 KV heads, FFN 1536, vocab 49152, context 8192, tied          (fp32 540)
=========  ===========================================================  ===========  =========

Building needs the ``llm`` extra (transformers, onnxruntime-genai) and the ``torch`` extra (the
builder and transformers import PyTorch); both steps run in child processes, so the caller (a
notebook's kernel) never imports them. Not a registered zoo model (:func:`explorer.zoo.build`
makes one ``ModelProto`` in memory; this is a folder with external data), like
:func:`explorer.zoo.write_external_chain`.

Examples
--------
>>> from explorer.zoo import decoders
>>> decoders.llama_config("small")["head_dim"]
16
>>> decoders.GENAI_FILES
('model.onnx', 'model.onnx.data', 'genai_config.json')
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from explorer.core.errors import ExplorerError, MissingDependencyError, UsageError

__all__ = [
    "SIZES",
    "PRECISIONS",
    "GENAI_FILES",
    "DecoderBuildError",
    "llama_config",
    "write_llama_checkpoint",
    "genai_decoder",
]

SIZES: tuple[str, ...] = ("small", "deep", "full")
"""``small``: the architecture at a few seconds' build, for tests; ``deep``: ``full``'s 30 layers (and
60 KV inputs and outputs) at ``small``'s widths, for tests of the whole graph's shape (a view, a layout);
``full``: SmolLM2-135M's shape."""

PRECISIONS: tuple[str, ...] = ("int4", "fp32")
"""The builder's CPU precisions made here (``-p``): int4 (``MatMulNBits``, block size 32) or fp32."""

GENAI_FILES: tuple[str, ...] = ("model.onnx", "model.onnx.data", "genai_config.json")
"""What a complete build holds (besides the tokenizer files)."""

Size = Literal["small", "deep", "full"]
Precision = Literal["int4", "fp32"]

BUILDER_MODEL = "HuggingFaceTB/SmolLM2-135M"
"""The name passed to the builder's ``-m``: it only picks the Llama family's builder (``-i`` gives
the weights)."""

_STAMP = "explorer-decoder.json"
"""Written last into a complete build: the arguments and versions it was built with."""

_SHAPES: dict[str, dict[str, int]] = {
    "small": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 512,
        "max_position_embeddings": 256,
    },
    "deep": {
        "num_hidden_layers": 30,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 512,
        "max_position_embeddings": 256,
    },
    "full": {  # HuggingFaceTB/SmolLM2-135M's config.json
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "intermediate_size": 1536,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
}

_TOKENS = {"<unk>": 0, "<s>": 1, "</s>": 2}
"""The minimal tokenizer's vocabulary: the builder only reads the special tokens' ids."""


def _check(size: str, precision: str = "int4") -> None:
    if size not in SIZES:
        raise UsageError(f"size must be one of {', '.join(SIZES)}, not {size!r}")
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def llama_config(size: Size = "small") -> dict[str, Any]:
    """The ``transformers.LlamaConfig`` arguments of a decoder of this size.

    Parameters
    ----------
    size : {"small", "deep", "full"}
        ``"small"``: 2 layers, hidden 64, 4 heads of 16, 2 KV heads, FFN 128, vocab 512, context 256
        (hidden and FFN are multiples of 32, the int4 block size); ``"deep"``: the same widths at 30
        layers; ``"full"``: SmolLM2-135M's shape.

    Returns
    -------
    dict
        Keyword arguments for ``LlamaConfig``: the shape, ``head_dim``, tied embeddings, RMS norm
        epsilon, rotary base and the special tokens' ids.

    Raises
    ------
    UsageError
        ``size`` is not one of :data:`SIZES`.

    Examples
    --------
    >>> config = llama_config("full")
    >>> config["num_hidden_layers"], config["hidden_size"], config["head_dim"], config["vocab_size"]
    (30, 576, 64, 49152)
    >>> llama_config("small")["tie_word_embeddings"]
    True
    >>> deep = llama_config("deep")
    >>> [deep[k] for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads")]
    [30, 64, 4, 2]
    """
    _check(size)
    shape = dict(_SHAPES[size])
    return {
        **shape,
        "head_dim": shape["hidden_size"] // shape["num_attention_heads"],
        "tie_word_embeddings": True,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "hidden_act": "silu",
        "bos_token_id": _TOKENS["<s>"],
        "eos_token_id": _TOKENS["</s>"],
        "pad_token_id": _TOKENS["</s>"],
    }


def write_llama_checkpoint(folder: str | os.PathLike[str], size: Size = "small", seed: int = 0) -> Path:
    """Write a Hugging Face checkpoint of a random Llama decoder and a minimal tokenizer to ``folder``.

    What the builder reads with ``-i``: ``config.json``, ``model.safetensors`` (from
    ``LlamaForCausalLM(LlamaConfig(**llama_config(size)))`` after ``torch.manual_seed(seed)``),
    ``generation_config.json``, and ``tokenizer.json`` / ``tokenizer_config.json`` of a three-word
    ``WordLevel`` tokenizer. Runs in this process (it imports torch and transformers);
    :func:`genai_decoder` runs it in a child process.

    Parameters
    ----------
    folder : str or os.PathLike
        Where to write (created if missing).
    size : {"small", "deep", "full"}
        See :func:`llama_config`.
    seed : int
        Seeds the weights; the same seed gives the same weights.

    Returns
    -------
    pathlib.Path
        The folder.

    Raises
    ------
    MissingDependencyError
        transformers (the ``llm`` extra) or torch (the ``torch`` extra) is not installed.

    Examples
    --------
    >>> import tempfile
    >>> try:
    ...     write_llama_checkpoint(tempfile.mkdtemp(), size="medium")
    ... except ValueError as err:
    ...     print(err)
    size must be one of small, deep, full, not 'medium'

    With the ``llm`` extra (a few seconds):

    >>> folder = write_llama_checkpoint(tempfile.mkdtemp())  # doctest: +SKIP
    >>> sorted(p.name for p in folder.iterdir())  # doctest: +SKIP
    ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
    """
    _check(size)
    try:
        for name in ("transformers", "tokenizers", "torch"):  # torch last: the slowest to import
            importlib.import_module(name)
        import torch
        from tokenizers import Tokenizer, models
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    except ImportError as err:
        raise MissingDependencyError(
            f"writing a Llama checkpoint needs transformers and torch ({err}): "
            "pip install 'onnx-graph-explorer[torch,llm]'"
        ) from None
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**llama_config(size)))
    model.save_pretrained(target)
    tokenizer = Tokenizer(models.WordLevel(dict(_TOKENS), unk_token="<unk>"))
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    ).save_pretrained(target)
    return target


def _versions() -> dict[str, str]:
    found = {}
    for package in ("transformers", "onnxruntime-genai", "torch"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            raise MissingDependencyError(
                f"building a GenAI decoder needs {package}, which is not installed: "
                "pip install 'onnx-graph-explorer[torch,llm]'"
            ) from None
    return found


def _run_step(step: str, command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = (done.stdout + "\n" + done.stderr).strip().splitlines()
        tail = "\n".join(lines[-15:])
        raise DecoderBuildError(f"{step} failed (exit {done.returncode}): {' '.join(command)}\n{tail}")


class DecoderBuildError(ExplorerError, RuntimeError):
    """A step of :func:`genai_decoder` failed; the message names the step and its last output lines."""


def genai_decoder(
    folder: str | os.PathLike[str],
    precision: Precision = "int4",
    size: Size = "small",
    seed: int = 0,
) -> Path:
    """Build a Llama decoder with onnxruntime-genai's model builder into ``folder``; return its model.onnx.

    Two child processes (``sys.executable``): one writes the random checkpoint
    (:func:`write_llama_checkpoint`) to a temporary folder, the other runs ``python -m
    onnxruntime_genai.models.builder -m HuggingFaceTB/SmolLM2-135M -i CHECKPOINT -o FOLDER -p
    PRECISION -e cpu -c CACHE`` offline. A complete build is stamped; a second call with the same
    arguments (and the same transformers, onnxruntime-genai and torch) on a complete folder returns
    at once.

    Parameters
    ----------
    folder : str or os.PathLike
        Where the builder writes (created if missing): ``model.onnx``, ``model.onnx.data``,
        ``genai_config.json`` and the tokenizer files. Files of another build there are replaced.
    precision : {"int4", "fp32"}
        int4: ``MatMulNBits`` weights (block size 32) and a ``GatherBlockQuantized`` embedding; fp32:
        float weights.
    size : {"small", "deep", "full"}
        ``"small"`` builds in seconds; ``"deep"`` is ``"full"``'s 30 layers at ``"small"``'s widths
        (about 17 s on two cores, ``"small"`` 14 s); ``"full"`` is SmolLM2-135M's shape (about a
        minute on two cores; int4 ~86 MB, fp32 ~540 MB). See :func:`llama_config`.
    seed : int
        Seeds the weights.

    Returns
    -------
    pathlib.Path
        ``folder/model.onnx``.

    Raises
    ------
    UsageError
        An unknown ``precision`` or ``size``.
    MissingDependencyError
        transformers, onnxruntime-genai (the ``llm`` extra) or torch is not installed.
    DecoderBuildError
        Writing the checkpoint or the builder failed: the step, its command and last lines.

    Examples
    --------
    >>> import tempfile
    >>> try:
    ...     genai_decoder(tempfile.mkdtemp(), precision="int8")
    ... except ValueError as err:
    ...     print(err)
    precision must be one of int4, fp32, not 'int8'

    With the ``llm`` and ``torch`` extras (about ten seconds):

    >>> path = genai_decoder(tempfile.mkdtemp(), "int4")  # doctest: +SKIP
    >>> sorted(p.name for p in path.parent.iterdir())  # doctest: +SKIP
    ['explorer-decoder.json', 'genai_config.json', 'model.onnx', 'model.onnx.data', 'tokenizer.json', ...]
    """
    _check(size, precision)
    target = Path(folder)
    key = {"precision": precision, "size": size, "seed": seed, **_versions()}
    stamp = target / _STAMP
    if all((target / name).is_file() for name in GENAI_FILES) and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == key:
                return target / "model.onnx"
        except (OSError, ValueError):
            pass
    target.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    package_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
    }
    with tempfile.TemporaryDirectory(prefix="explorer-llama-") as scratch:
        checkpoint, cache = Path(scratch) / "checkpoint", Path(scratch) / "cache"
        write = "import sys; from explorer.zoo.decoders import write_llama_checkpoint as w; "
        write += "w(sys.argv[1], sys.argv[2], int(sys.argv[3]))"
        _run_step(
            "writing the Llama checkpoint",
            [sys.executable, "-c", write, str(checkpoint), size, str(seed)],
            env,
        )
        builder = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-m", BUILDER_MODEL]
        builder += ["-i", str(checkpoint), "-o", str(target), "-p", precision, "-e", "cpu", "-c", str(cache)]
        _run_step("onnxruntime-genai's model builder", builder, env)
    missing = [name for name in GENAI_FILES if not (target / name).is_file()]
    if missing:
        raise DecoderBuildError(f"the model builder wrote no {', '.join(missing)} in {target}")
    stamp.write_text(json.dumps(key, indent=1) + "\n")
    return target / "model.onnx"
