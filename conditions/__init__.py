"""Experimental conditions behind one interface (see conditions.base).

Imports ``lca`` only. Registered: stateless, identity-only, summary, transcript-recall,
full-lca, adversarial-summary, truncation; ablations are parameters of these. ``conditions.checks`` holds
the contract every condition must meet (``check_condition``, ``parametrize_with_checks``).
"""

from conditions import baselines, recall, summaries, truncation  # noqa: F401  (registers the conditions)
from conditions.base import (
    ROLES,
    Condition,
    ConditionRuntime,
    ContextPacket,
    InjectedItem,
    Probe,
    Session,
    available_conditions,
    build_condition,
    clone,
    condition_class,
    register_condition,
    render_items,
)

__all__ = [
    "ROLES",
    "Condition",
    "ConditionRuntime",
    "ContextPacket",
    "InjectedItem",
    "Probe",
    "Session",
    "available_conditions",
    "build_condition",
    "clone",
    "condition_class",
    "register_condition",
    "render_items",
]
