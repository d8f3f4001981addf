"""``python -m tensprov_lab.bench`` — same as ``tensprov-lab bench``."""

from __future__ import annotations

import sys

from tensprov_lab._spark import JavaMissing
from tensprov_lab.bench.engine import main

try:
    sys.exit(main(sys.argv[1:]))
except JavaMissing as exc:
    print(f"tensprov-lab: {exc}", file=sys.stderr)
    sys.exit(2)
