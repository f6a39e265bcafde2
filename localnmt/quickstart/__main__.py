"""``python -m localnmt.quickstart``."""

import sys

from localnmt.quickstart.cli import main

sys.exit(main())
