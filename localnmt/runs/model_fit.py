"""Does a checkpoint fit what was asked for? Compared before torch would fail (or, worse,
succeed): the checkpoint's architecture, dimensions and vocabulary sizes against the data-bin's
dictionaries and against the model settings of a training command.

The model settings of a checkpoint are its ``--arch`` and the options its model class declares
(``add_args``: dimensions, layers, attention specs such as ``--encoder-attn-modifiers``, ...),
read from the configuration fairseq saves in every checkpoint, so checkpoints of any age
have them. Options that only regularise training or trade memory for time (dropouts,
layer drop, activation checkpointing) are left out: changing them does not change the model.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from localnmt.errors import CheckpointError
from localnmt.provenance import section, value

#: model options that leave the model (its function and parameters) unchanged
TRAINING_ONLY = frozenset({
    "dropout", "attention_dropout", "activation_dropout", "relu_dropout",
    "adaptive_softmax_dropout", "encoder_layerdrop", "decoder_layerdrop",
    "checkpoint_activations", "offload_activations", "min_params_to_wrap", "export",
    "quant_noise_pq", "quant_noise_pq_block_size", "quant_noise_scalar", "help",
})  # fmt: skip
#: model options whose change changes the parameters' shapes or names
SHAPE_OPTIONS = (
    "encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim",
    "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "decoder_output_dim",
)  # fmt: skip


class ModelMismatch(CheckpointError):
    """A checkpoint that does not fit the model or the dictionaries asked for."""


def model_config(state: Mapping) -> Any:
    """The model section of a checkpoint's configuration (a Namespace or a DictConfig)."""
    return section(state, "model")


def arch_of(config: Any) -> str | None:
    """The ``--arch`` of a model configuration."""
    return value(config, "arch") or value(config, "_name")


def model_option_names(arch: str | None) -> set[str]:
    """The options ``arch``'s model class declares (empty for an unknown arch)."""
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    model = ARCH_MODEL_REGISTRY.get(arch) or MODEL_REGISTRY.get(arch)
    if model is None:
        return set()
    parser = argparse.ArgumentParser(add_help=False)
    model.add_args(parser)
    return {a.dest for a in parser._actions} - TRAINING_ONLY


def _plain(x: Any) -> Any:
    """omegaconf containers as Python ones, so that values compare and print alike."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(x, (DictConfig, ListConfig)):
            return OmegaConf.to_container(x)
    except ImportError:
        pass
    return list(x) if isinstance(x, tuple) else x


def option(name: str) -> str:
    """``encoder_attn_modifiers`` → ``--encoder-attn-modifiers``."""
    return "--" + name.replace("_", "-")


def _filled_in_by_the_model(name: str, asked_value: Any, asked: Any) -> bool:
    """A value the model sets when it is built, so the saved one differs from what the
    command line gives: a default left as None (positions, say), the decoder's shared
    input/output embedding implied by ``--share-all-embeddings``."""
    if asked_value is None:
        return True
    return name == "share_decoder_input_output_embed" and bool(value(asked, "share_all_embeddings"))


def differences(held: Any, asked: Any, only: Sequence[str] | None = None) -> list[str]:
    """The model settings that differ, each ``--OPTION HELD (asked: ASKED)``; the arch first.
    ``only``: compare these options alone (besides the arch)."""
    held_arch, asked_arch = arch_of(held), arch_of(asked)
    out = [] if held_arch == asked_arch else [f"--arch {held_arch} (asked: {asked_arch})"]
    names = model_option_names(held_arch) | model_option_names(asked_arch)
    if only is not None:
        names &= set(only)
    for name in sorted(names):
        a, b = _plain(value(held, name)), _plain(value(asked, name))
        if a != b and not _filled_in_by_the_model(name, b, asked):
            out.append(f"{option(name)} {a!r} (asked: {b!r})")
    return out


def vocabulary_sizes(state: Mapping) -> tuple[int | None, int | None]:
    """The source and target vocabulary sizes of a checkpoint's embeddings."""
    params = state.get("model") or {}

    def rows(*keys: str) -> int | None:
        found = [params[k] for k in keys if k in params and hasattr(params[k], "shape")]
        return int(found[0].shape[0]) if found else None

    return (rows("encoder.embed_tokens.weight"),
            rows("decoder.embed_tokens.weight", "decoder.output_projection.weight"))  # fmt: skip


def describe(state: Mapping) -> str:
    """``localnmt_base, encoder 2x32, decoder 2x32, vocabularies 56/56`` (what a checkpoint
    holds, for messages)."""
    config = model_config(state)
    src, tgt = vocabulary_sizes(state)
    parts = [str(arch_of(config))]
    for side in ("encoder", "decoder"):
        layers, dim = value(config, f"{side}_layers"), value(config, f"{side}_embed_dim")
        if layers is not None or dim is not None:
            parts.append(f"{side} {layers} layers x {dim}")
    parts.append(f"vocabularies {src} (source) / {tgt} (target)")
    return ", ".join(parts)


def languages(state: Mapping, data_bin: Path) -> tuple[str | None, str | None]:
    """The source and target languages of a checkpoint's task (or of the data-bin's
    ``dict.*.txt`` when the task inferred them)."""
    task = section(state, "task")
    src, tgt = value(task, "source_lang"), value(task, "target_lang")
    if src and tgt:
        return src, tgt
    try:
        from localnmt.runs.generate import infer_langs

        return infer_langs(Path(data_bin), "test")
    except (FileNotFoundError, ValueError, CheckpointError):
        return None, None


def dictionary_size(path: Path) -> int:
    """Entries of a fairseq dictionary, its four special symbols included (its rows in the
    embedding)."""
    from fairseq.data import Dictionary

    return len(Dictionary.load(str(path)))


def check_vocabulary(checkpoint: Path, state: Mapping, data_bin: Path,
                     src: str | None = None, tgt: str | None = None) -> None:  # fmt: skip
    """The data-bin's dictionaries have as many entries as the checkpoint's embeddings rows;
    else a :class:`ModelMismatch` comparing the two in one line."""
    if not (src and tgt):
        src, tgt = languages(state, data_bin)
    if not (src and tgt):
        return
    for lang, rows, side in zip((src, tgt), vocabulary_sizes(state), ("source", "target")):
        path = Path(data_bin) / f"dict.{lang}.txt"
        if rows is None or not path.is_file():
            continue
        size = dictionary_size(path)
        if size != rows:
            raise ModelMismatch(
                f"{checkpoint} holds {describe(state)}, but {path} has {size} entries for its "
                f"{side} vocabulary of {rows}: give the data-bin the checkpoint was trained on"
            )


def parse_training_arguments(argv: Sequence[str]) -> argparse.Namespace | None:
    """fairseq-train's parsed arguments (the arch's defaults filled in), or None where
    fairseq would reject them itself (it says why when it runs)."""
    import contextlib
    import io

    from fairseq import options

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    parser = options.get_training_parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return options.parse_args_and_arch(parser, list(argv))
    except (SystemExit, Exception):  # noqa: BLE001  (fairseq reports its own errors)
        return None


def check_settings(checkpoint: Path, state: Mapping, asked: Any, *, shapes_only: bool,
                   remedy: str) -> None:  # fmt: skip
    """The checkpoint's model settings are those ``asked`` (a parsed fairseq-train
    Namespace); ``shapes_only``: only those that change its parameters' shapes (continuing
    another model's weights on purpose, ``--restore-file``). Else a :class:`ModelMismatch`
    listing the differences, ending with ``remedy``."""
    held = model_config(state)
    if held is None:
        return
    found = differences(held, asked, SHAPE_OPTIONS if shapes_only else None)
    if shapes_only and found and found[0].startswith("--arch "):
        found = found[1:]  # another arch of the same shapes may take these weights
    if found:
        raise ModelMismatch(f"{checkpoint} holds {describe(state)}, trained with other model "
                            f"settings: {'; '.join(found)}; {remedy}")  # fmt: skip


def load_failure(checkpoint: Path, err: BaseException) -> ModelMismatch:
    """torch's ``size mismatch`` / ``Missing key(s)`` as one line comparing the checkpoint
    with the model asked for."""
    cause = err.__cause__ or err.__context__ or err
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    detail = next((line for line in lines if line.startswith(("size mismatch", "Missing",
                                                             "Unexpected"))), lines[0] if lines
                  else type(cause).__name__)  # fmt: skip
    try:
        from localnmt.safe_load import load_checkpoint

        held = describe(load_checkpoint(Path(checkpoint), mmap=True))
    except CheckpointError:
        held = "another model"
    return ModelMismatch(f"{checkpoint} holds {held}, which does not fit the model asked for "
                         f"({detail.rstrip('.')}); give a checkpoint of this model, or the "
                         "options it was trained with")  # fmt: skip


def install() -> None:
    """Make fairseq's trainer say a checkpoint that does not fit its model in one line
    (:func:`load_failure`) instead of torch's traceback."""
    from fairseq.trainer import Trainer

    load = Trainer.load_checkpoint
    if getattr(load, "_localnmt_fit", False):
        return

    def load_checkpoint(self, filename, *args, **kwargs):
        try:
            return load(self, filename, *args, **kwargs)
        except Exception as err:
            if "Cannot load model parameters" in str(err):
                raise load_failure(Path(filename), err) from None
            raise

    load_checkpoint._localnmt_fit = True  # type: ignore[attr-defined]
    Trainer.load_checkpoint = load_checkpoint
