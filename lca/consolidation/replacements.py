"""The consolidation cycle as a second detector of replacement events (``lca.events``).

The writer may say, for the lines of the window it reads, that a later line ``corrects`` or ``replaces`` what an
earlier one said, or merely ``adds to`` it (``prompts.WRITER_REPLACES``; an "adds to" is recorded as nothing: it
replaces nothing). Each proposed replacement is then checked like any candidate:

- mechanically: both lines are lines of the window the writer was shown and turns the transcript holds (else it
  is *refused*: counted, a ``replacement`` failure of the writer, never recorded); the later turn was said after
  the earlier one; the two share at least one content word (``lca.ledger.key_terms``). One the ledger already holds
  (inferred before, or decided by a person) is *known*, and neither reviewed nor recorded again;
- by the reviewer, in a fresh call of its own that sees only the claim and the two lines, told to refute rather
  than confirm (``prompts.REPLACEMENT_*``); it must answer ``supported`` and ``accept``. An unreadable answer or a
  failing call fails closed, as a candidate's review does.

An accepted replacement is appended to the ledger as ``event_inferred`` (subject: the event id; data: the
``ReplacementEvent``, origin ``inferred``, detector ``consolidation``, evidence the writer's reason, redacted, at the
time of the later turn), where ``EventBook`` reads it. Its confidence is ``REVIEWED_CONFIDENCE`` (0.9: at or above
recall's default ``hold_confidence``, 0.8, so the replaced turn is held back) when the reviewer agreed, and
``UNVERIFIED_CONFIDENCE`` (0.6: marked, never held) in the cycle without verification (``verify=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

from lca.consolidation.parsing import REFUSAL, failure_kind, parse_review
from lca.consolidation.prompts import (
    MAX_CLAIM_CHARS,
    REPLACEMENT_DEMOS,
    REPLACEMENT_INSTRUCTIONS,
    REPLACEMENT_SYSTEM,
    reviewer_schema,
    with_demos,
)
from lca.consolidation.records import ConsolidationConfig, Failure, ReplacementCheck, SpanLine
from lca.consolidation.stores import CycleStores
from lca.events import DECISIONS, ReplacementEvent, event_id, turn_key
from lca.ledger import key_terms
from lca.ports import TextGenerator
from lca.secrets import redacted
from lca.types import parse_timestamp

DETECTOR = "consolidation"
REVIEWED_CONFIDENCE = 0.9  # the reviewer agreed: held back by recall's default hold_confidence (0.8)
UNVERIFIED_CONFIDENCE = 0.6  # written without verification (ablation): marked (mark_confidence 0.5), never held
EVENT_KINDS = {"corrects": "corrected", "replaces": "superseded"}  # "adds to" is no replacement
SHOWN_CHARS = 800  # of each line the reviewer is shown


class Proposal(NamedTuple):
    """One relation as the writer proposed it, with the line numbers of the window it was shown."""

    relation: str
    later: int
    earlier: int
    why: str
    window: int
    shown: frozenset[int]


class ReplacementReview:
    """Checks the replacements the writer proposed in one cycle and records those that pass."""

    def __init__(
        self,
        stores: CycleStores,
        reviewer: TextGenerator,
        config: ConsolidationConfig,
        *,
        say: Callable[[str], None],
    ) -> None:
        self.stores = stores
        self.reviewer = reviewer
        self.config = config
        self.say = say
        self._turns: dict[str, set[str]] = {}  # session -> the entry ids the transcript holds

    def run(
        self, proposals: Sequence[Proposal], lines: Sequence[SpanLine], failures: list[Failure]
    ) -> list[ReplacementCheck]:
        """Check every proposal, then append the accepted ones the ledger does not hold yet (under the writer lock)."""
        if not proposals:
            return []
        by_number = {line.number: line for line in lines}
        known = self._ledger_ids()
        checks: list[ReplacementCheck] = []
        events: dict[str, ReplacementEvent] = {}
        for proposal in proposals:
            check, event = self.check(proposal, by_number, known, failures)
            if check.event is not None:
                known.add(check.event)  # a pair proposed twice in one cycle is checked once
            if event is not None:
                events[event.id] = event
            checks.append(check)
        if not events:
            return checks
        with self.stores.writer_lock():
            held = self._ledger_ids()  # read again under the lock: another writer may have recorded one since
            out = []
            for check in checks:
                event = events.get(check.event or "") if check.verdict == "accept" else None
                if event is None:
                    out.append(check)
                elif event.id in held:
                    out.append(replace(check, verdict="known", reason="the ledger holds it already: not recorded"))
                else:
                    self.stores.ledger.append("event_inferred", event.id, event.to_dict())
                    held.add(event.id)
                    out.append(replace(check, recorded=True))
        return out

    def _ledger_ids(self) -> set[str]:
        kinds = {"event_inferred", *DECISIONS}
        return {e.subject for e in self.stores.ledger.events() if e.kind in kinds}

    def _holds(self, line: SpanLine) -> bool:
        """Whether the transcript holds the turn (read once per session a proposal names)."""
        if line.session_id not in self._turns:
            transcript = self.stores.transcript
            exists = transcript.session_path(line.session_id).exists()
            entries = transcript.read(line.session_id).entries if exists else []
            self._turns[line.session_id] = {e.id for e in entries}
        return line.entry_id in self._turns[line.session_id]

    def check(
        self, proposal: Proposal, by_number: dict[int, SpanLine], known: set[str], failures: list[Failure]
    ) -> tuple[ReplacementCheck, ReplacementEvent | None]:
        base = ReplacementCheck(
            proposal.relation, proposal.later, proposal.earlier, proposal.why, proposal.window, "reject", ""
        )
        if proposal.relation not in EVENT_KINDS:
            return replace(
                base, verdict="adds_to", reason="adds to the earlier line: no replacement, none recorded"
            ), None
        for number in (proposal.later, proposal.earlier):
            line = by_number.get(number) if number in proposal.shown else None
            if line is None or not self._holds(line):
                why = (
                    f"line {number} names no turn the transcript holds"
                    if number not in by_number or line is not None
                    else f"line {number} is not a line of the window the writer was shown"
                )
                failures.append(
                    Failure(
                        "replacement",
                        "unknown_turn",
                        f"window {proposal.window}: a proposed replacement ({proposal.later} {proposal.relation} "
                        f"{proposal.earlier}): {why}: refused",
                        raw=proposal.why,
                    )
                )
                return replace(base, verdict="refused", reason=f"{why}: refused, never recorded"), None
        later, earlier = by_number[proposal.later], by_number[proposal.earlier]
        of, by = turn_key(earlier.session_id, earlier.entry_id), turn_key(later.session_id, later.entry_id)
        base = replace(base, of=of, by=by, event=event_id(of, by))
        if not said_after(later, earlier):
            return replace(base, reason=f"line {proposal.later} was not said after line {proposal.earlier}"), None
        if not key_terms(later.text) & key_terms(earlier.text):
            return replace(base, reason="the two turns share no content word"), None
        if base.event in known:
            return replace(base, verdict="known", reason="the ledger holds it already (or it was proposed twice)"), None
        kind = EVENT_KINDS[proposal.relation]
        evidence = redacted(" ".join(proposal.why.split()))[:MAX_CLAIM_CHARS]
        if not self.config.verify:
            event = ReplacementEvent(
                kind, of, by, "inferred", DETECTOR, UNVERIFIED_CONFIDENCE, evidence, later.timestamp
            )
            reason = "accepted without verification (ablation): recorded to be marked, never held"
            return replace(base, verdict="accept", reason=reason, confidence=UNVERIFIED_CONFIDENCE), event
        return self.review(base, earlier, later, kind, evidence, failures)

    def review(
        self,
        base: ReplacementCheck,
        earlier: SpanLine,
        later: SpanLine,
        kind: str,
        evidence: str,
        failures: list[Failure],
    ) -> tuple[ReplacementCheck, ReplacementEvent | None]:
        """The reviewer's call: a fresh one, shown only the claim and the two lines."""
        task = "\n".join(
            [
                f"Claim ({base.relation}): line [{later.number}] {base.relation} what line [{earlier.number}] said: "
                f"{evidence or '(no reason given)'}",
                "Earlier line:",
                f"[{earlier.number}] {earlier.speaker}: {earlier.text[:SHOWN_CHARS]}",
                "Later line:",
                f"[{later.number}] {later.speaker}: {later.text[:SHOWN_CHARS]}",
                "",
                REPLACEMENT_INSTRUCTIONS,
            ]
        )
        self.say(f"verify replacement: line {later.number} {base.relation} line {earlier.number}")
        try:
            raw = self.reviewer.generate(
                with_demos(REPLACEMENT_SYSTEM, REPLACEMENT_DEMOS, task),
                max_tokens=self.config.reviewer_max_tokens,
                temperature=0.0,
                seed=self.config.seed,
                json_schema=reviewer_schema(()),
            )
        except Exception as exc:  # the generator's failure is the cycle's record, never a crash
            failures.append(Failure("verify", failure_kind(exc), str(exc), candidate=base.event))
            return replace(base, verdict="failed", reason=f"reviewer failed: {exc}"), None
        review = parse_review(raw)
        if review is None:
            kind_ = "refused" if REFUSAL.search(raw) else "malformed"
            failures.append(
                Failure("verify", kind_, "reviewer output lacks a readable supported or verdict", base.event, raw)
            )
            return replace(base, verdict="failed", reason="reviewer output unreadable: nothing recorded", raw=raw), None
        checked = replace(base, reasoning=review["reasoning"], raw=raw)
        if review["verdict"] != "accept" or not review["supported"]:
            said = " ".join(review["reasoning"].split())[:160] or "no reasoning given"
            return replace(checked, reason=f"reviewer rejected it: {said}"), None
        event = ReplacementEvent(
            kind, base.of or "", base.by or "", "inferred", DETECTOR, REVIEWED_CONFIDENCE, evidence, later.timestamp
        )
        reason = f"the reviewer agreed: {kind} at confidence {REVIEWED_CONFIDENCE}"
        return replace(checked, verdict="accept", reason=reason, confidence=REVIEWED_CONFIDENCE), event


def said_after(later: SpanLine, earlier: SpanLine) -> bool:
    """Whether ``later`` was said after ``earlier``: by their times, or, at one time (or none), by their order in one
    session; turns of two sessions at one time (or none) have no order to go by."""
    t_later, t_earlier = parse_timestamp(later.timestamp), parse_timestamp(earlier.timestamp)
    if t_later is not None and t_earlier is not None and t_later != t_earlier:
        return t_later > t_earlier
    return later.session_id == earlier.session_id and later.number > earlier.number
