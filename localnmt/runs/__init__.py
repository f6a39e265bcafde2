"""Running experiments: training recipes and launches (``localnmt-train``, :mod:`.train`;
resumable fingerprinted runs, :mod:`.train_run`), translation with fairseq, checkpoint
averaging, training-log parsing, table reproduction (:mod:`.reproduce`) and GLUE runs.

Scoring lives in :mod:`localnmt.evaluation`.
"""
