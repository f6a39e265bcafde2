"""Helpers shared by several test folders (importable: ``tests/`` is on ``sys.path``)."""
