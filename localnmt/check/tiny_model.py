"""A tiny translation model per method, trained for a few updates on synthetic data, in process.

The model is the ``localnmt_tiny`` architecture (2 + 2 layers, 32 dims, 4 heads) with the
method's spec at its site, built from fairseq's own argument parser as ``fairseq-train`` builds
it; the task is to reverse the source, one fixed batch of 16 sentences (4 to 12 tokens, the
source left-padded as fairseq pads it), so the loss of a working model falls within a few
Adam updates.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from fairseq.data import Dictionary
from torch import Tensor, nn

#: The spec flag of each site.
SITE_FLAGS = {
    "encoder_self": "--encoder-attn-modifiers",
    "decoder_self": "--decoder-attn-modifiers",
    "cross": "--cross-attn-modifiers",
}
VOCAB = 40


def dictionary() -> Dictionary:
    d = Dictionary()
    for i in range(VOCAB - len(d)):
        d.add_symbol(f"w{i}")
    return d


def build_tiny_model(site: str, spec: str, words: Dictionary, seed: int = 0) -> nn.Module:
    """``localnmt_tiny`` with ``spec`` at ``site``, no dropout, shared embeddings."""
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    argv = ["/nonexistent", "--arch", "localnmt_tiny", "--share-all-embeddings",
            "--dropout", "0", "--attention-dropout", "0"]  # fmt: skip
    if spec:
        argv += [SITE_FLAGS[site], spec]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    task = SimpleNamespace(source_dictionary=words, target_dictionary=words)
    torch.manual_seed(seed)
    return ARCH_MODEL_REGISTRY["localnmt_tiny"].build_model(args, task)


@dataclass
class Batch:
    src_tokens: Tensor
    src_lengths: Tensor
    prev_output_tokens: Tensor
    target: Tensor

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device) for t in vars(self).values()))


def reversal_batch(words: Dictionary, sentences: int = 16, seed: int = 0) -> Batch:
    """Source: random words + EOS, left-padded; target: the words reversed + EOS, right-padded;
    ``prev_output_tokens`` the target shifted right behind EOS (fairseq's teacher forcing)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, 13, (sentences,), generator=g)
    longest = int(lengths.max()) + 1
    src = torch.full((sentences, longest), words.pad())
    tgt = torch.full((sentences, longest), words.pad())
    prev = torch.full((sentences, longest), words.pad())
    for i, n in enumerate(lengths.tolist()):
        tokens = torch.randint(words.nspecial, VOCAB, (n,), generator=g)
        src[i, longest - n - 1 :] = torch.cat([tokens, torch.tensor([words.eos()])])
        reversed_tokens = torch.cat([tokens.flip(0), torch.tensor([words.eos()])])
        tgt[i, : n + 1] = reversed_tokens
        prev[i, 0] = words.eos()
        prev[i, 1 : n + 1] = reversed_tokens[:-1]
    return Batch(src, lengths + 1, prev, tgt)


def train_updates(
    model: nn.Module,
    batch: Batch,
    updates: int,
    dtype: torch.dtype = torch.float32,
    lr: float = 3e-3,
    pad: int = 1,
) -> list[float]:
    """The cross-entropy of each of ``updates`` Adam updates on ``batch`` (autocast to
    ``dtype`` on CUDA for float16 / bfloat16, with a gradient scaler for float16)."""
    device = batch.src_tokens.device
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    low = dtype != torch.float32
    scaler = torch.amp.GradScaler("cuda") if low and dtype == torch.float16 else None
    losses = []
    for _ in range(updates):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=low):
            logits, _ = model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
            loss = F.cross_entropy(
                logits.float().flatten(0, 1), batch.target.flatten(), ignore_index=pad
            )
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(float(loss.detach()))
    return losses
