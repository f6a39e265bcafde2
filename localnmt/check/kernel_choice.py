"""Which kernel computes each method family's attention on this device, and why the others
decline: one training forward per family and length under ``dispatch.trace(explain=True)``."""

from __future__ import annotations

from typing import Any

import torch

from localnmt.attention import dispatch
from localnmt.attention.dispatch import joined
from localnmt.check.layer_runs import make_attention, padded_batch

#: ``(site, spec)``: one per method family and site.
FAMILIES: list[tuple[str, str]] = [
    ("encoder_self", ""),
    ("encoder_self", "localness"),
    ("encoder_self", "rel_pos"),
    ("encoder_self", "csan_1d"),
    ("encoder_self", "csan_2d"),
    ("encoder_self", "block"),
    ("encoder_self", "bi_direct"),
    ("encoder_self", "neighbor"),
    ("encoder_self", "local_hard"),
    ("encoder_self", "local_heads[masks=prev1;next1;band2;global]"),
    ("encoder_self", "local_heads_renorm[masks=prev1;next1;band2;global]"),
    ("encoder_self", "tied_qk[groups=2]"),
    ("decoder_self", ""),
    ("decoder_self", "csan_1d"),
    ("cross", ""),
    ("cross", "gmm"),
    ("cross", "hardcoded_gaussian"),
]


def kernel_choices(
    device: torch.device, lengths: list[int], families: list[tuple[str, str]] = FAMILIES
) -> list[dict[str, Any]]:
    """For each family and length: the dispatches of one forward in training mode (gradients
    on, float32; 64 dims, 4 heads, 5 sentences of mixed padding), each with the kernel that
    ran, the path inside it, and every other kernel's reason."""
    rows = []
    for site, spec in families:
        layer = make_attention(site, spec, embed_dim=64, heads=4, train=True).to(device)
        for length in lengths:
            batch = padded_batch(site, length, 64, device=device)
            query = batch.query.requires_grad_()
            key = query if site != "cross" else batch.key
            with dispatch.trace(explain=True) as seen:
                layer(query, key, key, key_padding_mask=batch.key_padding_mask,
                      attn_mask=batch.attn_mask, need_weights=False)  # fmt: skip
            calls = [
                {"op": c.op, "kernel": c.kernel, "detail": c.detail, "declined": c.declined}
                for c in seen.calls
            ]
            rows.append({"site": site, "spec": spec or "plain", "length": length, "calls": calls})
    return rows


def format_choices(rows: list[dict[str, Any]]) -> str:
    """One line per dispatch: family, length, kernel (path), then why the others declined."""
    lines = []
    for row in rows:
        for call in row["calls"]:
            ran = call["kernel"] + (f" ({', '.join(call['detail'])})" if call["detail"] else "")
            others = " | ".join(f"{name}: {joined(why)}" for name, why in call["declined"].items())
            head = f"{row['site']}:{row['spec']} T={row['length']}"
            lines.append(f"{head:60} {call['op']:11} {ran}" + (f"  | {others}" if others else ""))
    return "\n".join(lines)
