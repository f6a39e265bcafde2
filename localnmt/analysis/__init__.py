"""Analyses of trained models: one command per figure or table of the papers
(``python -m localnmt.analysis.<name> --help``)."""
