"""Running experiments: training recipes and launches, translation with fairseq, checkpoint
averaging, training-log parsing, table reproduction and GLUE runs.

Scoring lives in :mod:`localnmt.evaluation`.
"""
