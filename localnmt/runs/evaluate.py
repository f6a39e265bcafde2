"""``python -m localnmt.runs.evaluate``: the command of :mod:`localnmt.runs.decode_and_score`
(translate a test set with a checkpoint and score it), under the name command lines and
``scripts/evaluate.sh`` have always used."""

from localnmt.runs.decode_and_score import main

if __name__ == "__main__":
    main()
