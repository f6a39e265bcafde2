"""Where the plugin lives, for ``fairseq-train --user-dir $(localnmt-path)``."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def main() -> None:
    """Print the directory to pass to fairseq's ``--user-dir``."""
    print(PACKAGE_DIR)


if __name__ == "__main__":
    main()
