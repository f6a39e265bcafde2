"""``python -m localnmt.runs.reproduce``."""

from localnmt.runs.reproduce.reproduce_cli import main

main()
