"""The two memoryless baselines: no memory at all, and standing identity only."""

from __future__ import annotations

from conditions.base import Condition, ContextPacket, InjectedItem, Probe, register_condition


@register_condition
class Stateless(Condition):
    """No memory at all: the probe alone."""

    name = "stateless"

    def __init__(self, budget_tokens: int = 1200) -> None:
        self.budget_tokens = budget_tokens

    def build_context(self, probe: Probe) -> ContextPacket:
        return self._packet(probe, [])


@register_condition
class IdentityOnly(Condition):
    """The standing identity and user files, nothing from the history."""

    name = "identity-only"

    def __init__(self, budget_tokens: int = 1200) -> None:
        self.budget_tokens = budget_tokens

    def build_context(self, probe: Probe) -> ContextPacket:
        text = self._fit(identity_block(self.runtime.identity))
        items = [InjectedItem("identity", "identity-files", text, self.runtime.count_tokens(text))] if text else []
        return self._packet(probe, items)


def identity_block(files) -> str:
    """The scenario's identity, user and instruction texts, tagged as the substrate renders them."""
    return "\n".join(f"<{name}>\n{text.strip()}\n</{name}>" for name, text in files.items() if text and text.strip())
