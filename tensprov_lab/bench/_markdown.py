"""Benchmark figures written into a Markdown file (``tensprov-lab bench … --markdown F``).

Each benchmark owns one section of the file, between two HTML comments that name it
(``<!-- bench:KEY -->`` … ``<!-- /bench:KEY -->``): writing the benchmark's figures
replaces its section whole (or appends it the first time), so ``docs/benchmarks.md``
holds the current figure of each benchmark, refreshed by the command that measures it,
and its history is git's.  A section says the command, the date, the commit, the machine
and the Spark version under its heading.

Examples
--------
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "b.md")
>>> refresh(path, "demo", "Demo bench", "tensprov-lab bench --demo", "| a |\\n|---|\\n| 1 |",
...         about="2026-01-01 · commit abc")
>>> refresh(path, "demo", "Demo bench", "tensprov-lab bench --demo", "| a |\\n|---|\\n| 2 |",
...         about="2026-01-02 · commit def")
>>> text = open(path).read()
>>> text.count("<!-- bench:demo -->"), "| 2 |" in text, "| 1 |" in text
(1, True, False)
>>> table(["x", "y"], [[1, 2.5]])
'| x | y |\\n|---|---|\\n| 1 | 2.5 |'
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["about_this_run", "command_line", "pyspark_minor", "refresh", "table"]


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
            timeout=10, check=True,
        )  # fmt: skip
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        return out.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _memory_gib() -> str:
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        return f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        return "? GiB"


def _java(spark: object | None) -> str:
    """The Java version of ``spark``'s JVM: this process's, else (a Connect session) the
    server's, asked through SQL's ``reflect``; ``?`` when neither answers."""
    try:
        jvm = spark._jvm  # type: ignore[union-attr]
        return str(jvm.java.lang.System.getProperty("java.version"))
    except Exception:  # noqa: BLE001 - a Connect session: no JVM in this process
        pass
    try:
        query = "SELECT reflect('java.lang.System', 'getProperty', 'java.version')"
        return str(spark.sql(query).first()[0])  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - reflect refused, or no session
        return "?"


def about_this_run(spark: object | None = None, java: str | None = None) -> str:
    """Date, commit, machine, Python, Java (``java``, else asked of ``spark``'s JVM) and
    pyspark of this run, on one line."""
    import pyspark

    date = datetime.date.today().isoformat()
    machine = f"{os.cpu_count()} cores, {_memory_gib()}, {platform.system()}"
    python = f"Python {sys.version.split()[0]}"
    return (
        f"{date} · commit {_commit()} · {machine} · {python} · Java {java or _java(spark)} · "
        f"pyspark {pyspark.__version__}"
    )


def pyspark_minor() -> str:
    """pyspark's version as ``MAJOR.MINOR`` (sections are kept per version)."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def command_line(argv: Sequence[str] | None) -> str:
    """The ``tensprov-lab bench`` command of ``argv`` (default: this process's), without
    ``--markdown FILE``: the command a section says printed its figures."""
    words = list(sys.argv[1:] if argv is None else argv)
    if "--markdown" in words:
        at = words.index("--markdown")
        del words[at : at + 2]
    words = [w for w in words if not w.startswith("--markdown=")]
    if words[:1] == ["bench"]:  # the CLI's own argv
        words = words[1:]
    return " ".join(["tensprov-lab bench", *words])


def refresh(path: str, key: str, title: str, command: str, body: str, about: str) -> None:
    """Write benchmark ``key``'s section of the Markdown file ``path``: its ``title``,
    the ``command`` that printed it, ``about`` (see :func:`about_this_run`) and ``body``;
    replaces the section if the file has it, else appends it."""
    begin, end = f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"
    section = f"{begin}\n## {title}\n\n`{command}`\n\n{about}\n\n{body.strip()}\n{end}\n"
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + section
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
