"""Experimental conditions behind one interface (see conditions.base).

Imports ``lca`` only. Registered: stateless, identity-only, summary, transcript-recall,
full-lca, adversarial-summary; ablations are parameters of these.
"""

from conditions.base import (ROLES, Condition, ConditionRuntime, ContextPacket, InjectedItem, Probe, Session,
                             available_conditions, build_condition, condition_class, register_condition,
                             render_items)
from conditions import baselines, recall, summaries  # noqa: F401  (registers the conditions)

__all__ = ["ROLES", "Condition", "ConditionRuntime", "ContextPacket", "InjectedItem", "Probe", "Session",
           "available_conditions", "build_condition", "condition_class", "register_condition", "render_items"]
