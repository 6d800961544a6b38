"""``python -m headwater``: the same as the ``headwater`` command."""

import sys

from headwater.cli import main

sys.exit(main())
