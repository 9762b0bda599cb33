"""Summary-conditioned agents: a rolling structured summary, and the adversarial summary baseline.

The adversarial summary is the guard against a weak-summary strawman: the summarizer reads the
whole transcript, a second pass checks each part of the transcript against the draft and repairs
what it left out, and the result gets exactly the token budget full LCA injects for the same
probe, measured by running full LCA beside it on the same history.
"""

from __future__ import annotations

from collections.abc import Sequence

from conditions.base import Condition, ContextPacket, InjectedItem, Probe, Session, register_condition
from conditions.baselines import identity_block
from lca.token_windows import windows_by_tokens
from lca.types import EntryKind, TranscriptEntry

SUMMARY_SYSTEM = (
    "You keep a memory summary of conversations for an assistant. Write short bullet points: facts "
    "about the user and the work, decisions, preferences, dates, and open threads. Keep names, "
    "numbers and dates exactly. Never invent anything."
)
REVIEW_SYSTEM = (
    "You check a summary against part of the original conversation. List every fact, decision, "
    "preference, name, number or date in the conversation lines that the summary leaves out, one "
    "bullet each. Write NONE if nothing is missing."
)
_SKIP = {EntryKind.CHECKPOINT, EntryKind.HANDOFF, EntryKind.REASONING}


def transcript_lines(entries: Sequence[TranscriptEntry]) -> list[str]:
    out = []
    for e in entries:
        if e.kind in _SKIP or not e.content.strip():
            continue
        speaker = e.author or {"user_turn": "user", "assistant_turn": "assistant"}.get(e.kind.value, e.kind.value)
        when = f"[{e.timestamp[:10]}] " if e.timestamp else ""
        out.append(f"{when}{speaker}: {' '.join(e.content.split())}")
    return out


def windows(lines: Sequence[str], tokens: int) -> list[list[str]]:
    return windows_by_tokens(lines, tokens)


class _SummaryBase(Condition):
    window_tokens: int  # each summary step reads at most this many tokens of transcript

    def _summarize(self, previous: str, lines: Sequence[str], *, max_tokens: int) -> str:
        """Fold lines into the summary one window at a time (the context of a small local model is short)."""
        summarizer = self.runtime.generator("summarizer")
        summary = previous
        for window in windows(lines, self.window_tokens):
            prompt = (
                f"Current summary:\n{summary or '(empty)'}\n\nNew conversation lines:\n"
                + "\n".join(window)
                + "\n\nWrite the updated summary as bullet points."
            )
            summary = summarizer.generate(
                [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0.0,
                seed=self.runtime.seed,
            ).strip()
        return summary

    def _items(self, summary: str, source: str, budget: int) -> list[InjectedItem]:
        text = self._fit(summary, budget)
        return [InjectedItem("summary", source, text, self.runtime.count_tokens(text))] if text else []


@register_condition
class RollingSummary(_SummaryBase):
    """Structured summaries written by the summarizer role at each session end; no transcript recall."""

    name = "summary"
    uses_roles = ("summarizer",)

    def __init__(self, budget_tokens: int = 1200, window_tokens: int = 900, include_identity: int = 1) -> None:
        self.budget_tokens = budget_tokens
        self.window_tokens = window_tokens
        self.include_identity = include_identity

    def reset(self) -> None:
        super().reset()
        self.summary = ""
        self.pending: list[TranscriptEntry] = []
        self.sessions_summarized = 0

    def ingest(self, session: Session) -> None:
        self.pending.extend(session.entries)

    def end_session(self) -> None:
        if self.pending:
            self.summary = self._summarize(
                self.summary, transcript_lines(self.pending), max_tokens=min(self.budget_tokens, 512)
            )
            self.sessions_summarized += 1
        self.pending = []

    def build_context(self, probe: Probe) -> ContextPacket:
        identity = identity_block(self.runtime.identity) if self.include_identity else ""
        identity_items = (
            [InjectedItem("identity", "identity-files", identity, self.runtime.count_tokens(identity))]
            if identity
            else []
        )
        left = max(0, self.budget_tokens - sum(i.tokens for i in identity_items))
        items = identity_items + self._items(self.summary, f"summary:{self.sessions_summarized}-sessions", left)
        shortfalls = {}
        if self.sessions_summarized and not self.summary.strip():
            shortfalls["empty_summary"] = f"the summarizer left no summary after {self.sessions_summarized} session(s)"
        return self._packet(
            probe, items, notes={"sessions_summarized": self.sessions_summarized, "shortfalls": shortfalls}
        )


@register_condition
class AdversarialSummary(_SummaryBase):
    """The strongest honest summary baseline (see the module docstring).

    ``budget_tokens`` is the cap; with ``match_full_lca`` = 1 the summary's budget is what
    ``full-lca`` injects for this probe on this history (never more than the cap).
    """

    name = "adversarial-summary"
    uses_roles = ("summarizer", "reviewer")

    def __init__(
        self, budget_tokens: int = 1200, window_tokens: int = 900, match_full_lca: int = 1, review_passes: int = 1
    ) -> None:
        self.budget_tokens = budget_tokens
        self.window_tokens = window_tokens
        self.match_full_lca = match_full_lca
        self.review_passes = review_passes

    def reset(self) -> None:
        self.close()  # the previous history's shadow lives outside this condition's home: close it first
        super().reset()
        self.entries: list[TranscriptEntry] = []
        self.shadow = None
        if self.match_full_lca:
            from conditions.recall import FullLCA

            self.shadow = FullLCA(budget_tokens=self.budget_tokens).attach(self.runtime)
            self.shadow.home_name = "adversarial-shadow-full-lca"
            self.shadow.reset()

    def ingest(self, session: Session) -> None:
        self.entries.extend(session.entries)
        if self.shadow is not None:
            self.shadow.ingest(session)

    def end_session(self) -> None:
        if self.shadow is not None:
            self.shadow.end_session()

    def close(self) -> None:
        shadow = getattr(self, "shadow", None)
        if shadow is not None:
            shadow.close()

    def build_context(self, probe: Probe) -> ContextPacket:
        budget = self.budget_tokens
        measured = None
        if self.shadow is not None:
            measured = self.shadow.build_context(probe).injected_tokens
            budget = min(budget, measured)
        lines = transcript_lines(self.entries)
        draft = self._summarize("", lines, max_tokens=max(16, min(budget, 512)))
        reviewer = self.runtime.generator("reviewer")
        repairs = 0
        for _ in range(self.review_passes):
            missing: list[str] = []
            for window in windows(lines, self.window_tokens):
                answer = reviewer.generate(
                    [
                        {"role": "system", "content": REVIEW_SYSTEM},
                        {
                            "role": "user",
                            "content": f"Summary:\n{draft}\n\nConversation lines:\n"
                            + "\n".join(window)
                            + "\n\nWhat does the summary leave out?",
                        },
                    ],
                    max_tokens=200,
                    temperature=0.0,
                    seed=self.runtime.seed,
                ).strip()
                if answer and answer.upper().strip(".") != "NONE":
                    missing.append(answer)
            if not missing:
                break
            repairs += len(missing)
            draft = self._summarize(
                draft, ["Facts the summary left out:"] + missing, max_tokens=max(16, min(budget, 512))
            )
        items = self._items(draft, "summary:adversarial", budget)
        shortfalls = (
            {"empty_summary": "the summarizer left no summary of the history"} if lines and not draft.strip() else {}
        )
        return self._packet(
            probe,
            items,
            notes={
                "matched_budget": budget,
                "full_lca_injected": measured,
                "repaired_windows": repairs,
                "shortfalls": shortfalls,
            },
        )
