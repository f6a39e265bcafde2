"""``python -m localnmt.runs.reproduce``."""

from localnmt.runs.reproduce.cli import main

main()
