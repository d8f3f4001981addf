"""``python -m tensprov_lab.bench`` — same as ``tensprov-lab bench``."""

from __future__ import annotations

import sys

from tensprov_lab.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
