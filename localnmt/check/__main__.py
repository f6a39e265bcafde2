"""``python -m localnmt.check``: see :mod:`localnmt.check`."""

import sys

from localnmt.check import main

sys.exit(main())
