"""Command line: ``tensprov-lab demo | bench``."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="tensprov-lab", description="Fine-grained provenance for PySpark pipelines."
    )
    parser.add_argument(
        "command",
        choices=["demo", "bench"],
        help="demo: the quickstart notebook in JupyterLab (demo --terminal: in the terminal); "
        "bench: capture and query benchmarks. `tensprov-lab COMMAND --help` for options",
    )
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    command, rest = argv[0], argv[1:]
    from tensprov_lab._spark import JavaMissing

    try:
        if command == "bench":
            from tensprov_lab.bench.engine import main as bench

            return bench(rest)
        if command == "demo":
            from tensprov_lab.demo import main as demo

            return demo(rest)
    except JavaMissing as exc:
        print(f"tensprov-lab: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
