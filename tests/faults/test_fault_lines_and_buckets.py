"""Lines end at ``\\n`` only, everywhere corpus text is read (a U+0085 or U+2028 inside a
sentence does not split it), and every sentence lands in a length bucket."""

from __future__ import annotations

from localnmt.evaluation import multi_ref
from localnmt.evaluation.breakdown import bleu_by_length
from localnmt.runs.generate import parse_generate

# U+0085 (NEXT LINE) and U+2028 (LINE SEPARATOR): str.splitlines() would split here
LINES = ["ein Satz\u0085mit NEL", "zwei\u2028Zeilen?", "drei"]


def test_nist_references_keep_u0085_inside_their_line(tmp_path, capsys) -> None:
    for r in range(2):
        (tmp_path / f"mt03.ref{r}").write_text("".join(x + "\n" for x in LINES), "utf-8")
    (tmp_path / "hyp.txt").write_text("".join(x + "\n" for x in LINES), "utf-8")
    assert multi_ref.read_refs(tmp_path, "mt03") == [LINES, LINES]
    argv = ["--refs-dir", str(tmp_path), "--hyp", f"mt03={tmp_path / 'hyp.txt'}", "--cased"]
    assert multi_ref.main(argv) == 0
    assert capsys.readouterr().out.startswith("mt03\t100.00")


def test_generate_output_keeps_u0085_inside_a_hypothesis() -> None:
    text = "".join(f"S-{i}\tsrc {i}\nH-{i}\t-0.1\t{line}\n" for i, line in enumerate(LINES))
    assert parse_generate(text, "H") == dict(enumerate(LINES))


def test_a_sentence_with_an_empty_source_is_in_a_bucket() -> None:
    sources = ["", "w " * 5, "w " * 25]
    hyps = refs = ["a b c d", "a b c d", "a b c d"]
    buckets = bleu_by_length(sources, hyps, refs, edges=(20,))
    assert sum(b.sentences for b in buckets) == 3
    assert [(b.label, b.sentences) for b in buckets] == [("(0,20]", 2), ("[21,∞)", 1)]
