"""Hypothesis settings of the property tests that run Spark jobs: a fixed number of
examples that an environment variable may change (``TENSPROV_NOSHRINK`` skips
shrinking a failure), derandomized (a failure comes back
on the next run), no deadline (a Spark job's time varies), and the health checks a slow
Spark example trips switched off."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings

#: the health checks every such test switches off
SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]


def spark_examples(env: str, default: int, **more: Any) -> settings:
    """Settings of ``default`` examples (``$env`` when set); a failing example is shrunk
    unless ``TENSPROV_NOSHRINK`` is set; ``more`` adds to or overrides the settings."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if not os.environ.get("TENSPROV_NOSHRINK"):
        phases.append(Phase.shrink)
    chosen: dict[str, Any] = {
        "max_examples": int(os.environ.get(env, str(default))),
        "phases": phases,
        "deadline": None,
        "derandomize": True,
        "suppress_health_check": SLOW,
        **more,
    }
    return settings(**chosen)
