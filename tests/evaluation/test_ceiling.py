"""The BLEU ceiling of target-side preprocessing against raw references."""

import sacrebleu
from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

from localnmt.evaluation.ceiling import ceiling, main, round_trip

REFS = ["„Das ist schön“, sagte sie.", "Er sagte: „Wir kommen morgen.“", "Ein Satz – mit Strich.",
        "Das Wetter ist heute schön."]  # fmt: skip


def moses_round_trip(line: str, normalize: bool) -> str:
    """Plain sacremoses calls: (normalise,) tokenise, detokenise."""
    if normalize:
        line = MosesPunctNormalizer(lang="de").normalize(line)
    tokens = MosesTokenizer(lang="de").tokenize(line, aggressive_dash_splits=True, escape=False)
    return MosesDetokenizer(lang="de").detokenize(tokens)


def test_round_trip_is_the_pipeline_then_the_detokeniser():
    for normalize in (True, False):
        assert round_trip(REFS, "de", normalize) == [moses_round_trip(r, normalize) for r in REFS]


def test_normalisation_lowers_the_ceiling(capsys):
    normalised = round_trip(REFS, "de", True)
    assert normalised[0] == '"Das ist schön", sagte sie.' and normalised[3] == REFS[3]
    low = ceiling(REFS, "de", True)[0].score
    assert low == sacrebleu.corpus_bleu(normalised, [REFS]).score and low < 100
    assert round_trip(REFS, "de", False) == REFS  # these quotes survive un-normalised
    assert abs(ceiling(REFS, "de", False)[0].score - 100) < 1e-9


def test_command_prints_both(tmp_path, capsys):
    ref = tmp_path / "ref.de"
    ref.write_text("".join(r + "\n" for r in REFS), encoding="utf-8")
    assert main(["--ref", str(ref), "--lang", "de"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("normalised") and "3 of 4 lines changed" in out[0]
    assert out[1].startswith("unnormalised ceiling 100.00") and "0 of 4" in out[1]
