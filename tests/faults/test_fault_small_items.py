"""Smaller faults: a relative-position clip far beyond any distance, a link inside a
downloaded archive, and a report that starred a difference it showed as 0.00."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from localnmt.attention import SpecError
from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import build_modifiers, parse_spec
from localnmt.data.wmt_extract import Text, materialise
from localnmt.errors import DataError
from localnmt.quickstart.report import SystemResult, _delta


def test_a_huge_rel_pos_clip_is_a_spec_error_not_an_allocation() -> None:
    site = AttentionSite("encoder_self", 0, num_layers=1, embed_dim=64, num_heads=4)
    with pytest.raises(SpecError, match=r"'clip' of method 'rel_pos' must be between 0 and "
                       r"1024 \(the model's positions\), got 1000000000"):  # fmt: skip
        build_modifiers(parse_spec("rel_pos[clip=1000000000]"), site)
    assert build_modifiers(parse_spec("rel_pos[clip=1024]"), site)[0].rel_key.num_embeddings == 2049


def _archive(path: Path, links: dict[str, str]) -> Path:
    """A .tgz with one regular file and the given symbolic links (member -> target)."""
    with tarfile.open(path, "w:gz") as tf:
        data = b"a real line\n"
        info = tarfile.TarInfo("training/real.en")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        for member, target in links.items():
            link = tarfile.TarInfo(member)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tf.addfile(link)
    return path


@pytest.mark.parametrize("target", ["../../../etc/hostname", "missing.en", "real.en"],
                         ids=["out-of-the-archive", "dangling", "inside"])  # fmt: skip
def test_a_link_in_an_archive_is_refused_in_one_message(tmp_path, target) -> None:
    root = tmp_path / "raw"
    root.mkdir()
    archive = _archive(root / "corpus.tgz", {"training/corpus.en": target})
    with pytest.raises(DataError) as err:
        materialise(Text("training/corpus.en", "corpus.tgz"), root, tmp_path / "cache")
    assert str(err.value).startswith(
        f"{archive}: training/corpus.en is a link (to {target}), not a file; links in archives "
        "are not followed"
    )
    assert not list((tmp_path / "cache").rglob("*.en"))


def _system(name: str, bleu: float, p_value: float | None) -> SystemResult:
    return SystemResult(name=name, row=name, arch="a", args=[], bleu=bleu, ci=[bleu, bleu],
                        p_value=p_value, updates=1, updates_per_s=1.0, params=1)  # fmt: skip


def test_the_report_stars_only_differences_it_shows() -> None:
    base = _system("base", 0.0, None)
    assert _delta(_system("x", 0.0, 0.02), base) == "0.00 (p=0.020)"
    assert _delta(_system("y", 0.01, 0.02), base) == "+0.01 (p=0.020) *"
    assert _delta(_system("z", 12.33, 0.004), _system("b", 12.35, None)) == "-0.02 (p=0.004) **"
    assert _delta(base, base) == "-"
