"""Recall's declared settings: the resonance weights (``lca.recall.resonance``) and everything else a recall is
configured by."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from lca.errors import RecordFormatError
from lca.params import ParameterError
from lca.recall.floor import FLOOR_MODES
from lca.recall.resonance import TERMS, ResonanceWeights
from lca.recall.terms import DEFAULT_AUTHORITY, PEER_AGENT_AUTHORITY
from lca.recall_log import DEFAULT_MAX_BYTES, MIN_MAX_BYTES
from lca.retrieval.config import RetrievalConfig

# the resonance terms and their weights are declared in lca.recall.resonance; named here too, beside the settings
__all__ = ["DEFAULT_AUTHORITY", "POLICIES", "TERMS", "RecallConfig", "ResonanceWeights"]


@dataclass(frozen=True)
class RecallConfig:
    """Everything recall does besides weighting; parameters are plain numbers and strings."""

    weights: ResonanceWeights = field(default_factory=ResonanceWeights)
    pool: int = 50
    small_store: int = 200  # a store of at most this many chunks is ranked whole, and is small (whole-history rule)
    floor: float = 0.50  # the absolute floor: a candidate at or above it always clears
    floor_mode: str = "store"  # store: lowered to this store's off-topic ceiling + margin | absolute
    floor_min: float = 0.20  # store mode never lowers the floor below this
    floor_margin: float = 0.05  # store mode: how far above the store's off-topic ceiling the floor sits
    date_anchor: bool = True  # a turn dated where the query's date expression points clears the floor
    correction_pairing: bool = True  # a turn an explicit event corrected brings the turn that corrects it
    exchanges: bool = True  # a recalled turn brings the turn right before it in its session (what it answers),
    # within the budget and outside the quota
    excerpts: bool = True  # a turn longer than item_char_cap shows its opening and the sentences with the query's
    # terms (lca.recall.shown); off: its opening only
    resume_turns: int = 4  # a question that resumes interrupted work: the latest session's last N turns come first
    fit_budget: bool = True  # when every candidate that clears the floor fits the budget, quotas do not cut it
    store_topic: bool = True  # a question on a small store's topic (centroid or subject, above off-topic): its history
    shared_names: bool = True  # a question naming a name a small store's history uses is about that history
    small_store_feedback: bool = False  # off: a small store is ranked without the pseudo-relevance feedback round
    # (its top turns are the store's subject; moving the query towards them drifts it from what was asked)
    topic_margin: float = 0.02  # how far above the off-topic questions' best reading of the topic a question must be
    turn_supersession: bool = True  # a turn a later event corrected or superseded (labelled or inferred) is held
    # back or marked (lca.events); off: the transcript alone, as if no turn ever replaced another
    past_tense: bool = True  # a question in the past tense ("when did ...") asks what happened: a turn a later
    # decision superseded is shown to it, marked, not held; a corrected one stays held (a mistake is not history).
    # Off: only a question that says it asks about history (RecallContext.about_history) is shown them
    project_filter: bool = False  # a turn said in another project than the one asked in is held back (off: it is
    # shown with the project it was said in, and Q ranks it lower)
    hold_confidence: float = 0.85  # an inferred replacement at or above this holds the turn back (as a label does):
    # the lowest confidence whose precision reached 0.9 scored leaving one file out (docs/recall.md)
    mark_confidence: float = 0.5  # ... at or above this the turn may be shown, marked with what replaced it
    agent_turn_risk: float = 0.1  # K of a turn the agent wrote, unless the question asks what the agent said: the
    # user's own words come first, the agent's restatement of them (and its errors) after (docs/recall.md); 0: off
    reply_inheritance: float = 0.0  # a user's turn scores as if its S were at least this share of the S of the
    # agent's reply to it (a marked one, K above), and clears the floor with it: the reply restates the turn in
    # fuller words, the turn is the source (lca.recall.pairing); 0: off
    memory_quota: int = 4
    transcript_quota: int = 2
    item_char_cap: int = 400  # an item at most about a tenth of the default budget; a longer turn is excerpted
    mmr_lambda: float = 0.75
    token_budget: int = 1200
    half_life_days: float = 30.0
    policy: str = "fixed-k"
    wildcard_mode: str = "precision"  # precision (none) | balanced | explore: share of slots for dormant records
    authority_table: Mapping[str, float] | None = None  # overrides DEFAULT_AUTHORITY rows
    retrieval: RetrievalConfig | None = None  # the ranking S comes from; None: the store's own (retrieval.yaml)
    log_max_bytes: int = (
        DEFAULT_MAX_BYTES  # the recall log's bound (lca.recall_log): rotated, compacted, oldest dropped
    )

    def __post_init__(self) -> None:
        checks = {
            "pool": self.pool >= 1,
            "small_store": self.small_store >= 0,
            "resume_turns": self.resume_turns >= 0,
            "memory_quota": self.memory_quota >= 0,
            "transcript_quota": self.transcript_quota >= 0,
            "item_char_cap": self.item_char_cap >= 1,
            "token_budget": self.token_budget >= 0,
            "floor": -1.0 <= self.floor <= 1.0,
            "floor_min": -1.0 <= self.floor_min <= 1.0,
            "floor_margin": -1.0 <= self.floor_margin <= 1.0,
            "topic_margin": -1.0 <= self.topic_margin <= 1.0,
            "agent_turn_risk": 0.0 <= self.agent_turn_risk <= 1.0,
            "reply_inheritance": 0.0 <= self.reply_inheritance <= 1.0,
            "mmr_lambda": 0.0 <= self.mmr_lambda <= 1.0,
            "half_life_days": self.half_life_days > 0,
            "hold_confidence": 0.0 <= self.hold_confidence <= 1.0,
            "mark_confidence": 0.0 <= self.mark_confidence <= self.hold_confidence,
        }
        for name, ok in checks.items():
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value) or not ok:
                raise RecordFormatError(f"invalid value {value!r}", field=name)
        for key, value in (self.authority_table or {}).items():
            if key not in DEFAULT_AUTHORITY:
                raise RecordFormatError(
                    f"unknown authority row {key!r}; known: {', '.join(DEFAULT_AUTHORITY)}",
                    field=f"authority_table.{key}",
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise RecordFormatError(f"must be a number in [0, 1], got {value!r}", field=f"authority_table.{key}")
        table = {**DEFAULT_AUTHORITY, **(self.authority_table or {})}
        if table[PEER_AGENT_AUTHORITY] >= table["transcript"]:  # a peer agent ranks below the user, whatever is set
            named = PEER_AGENT_AUTHORITY if PEER_AGENT_AUTHORITY in (self.authority_table or {}) else "transcript"
            raise RecordFormatError(
                f"the {PEER_AGENT_AUTHORITY} row ({table[PEER_AGENT_AUTHORITY]:g}) must stay below the transcript row "
                f"({table['transcript']:g}): a peer agent's messages rank below the user's",
                field=f"authority_table.{named}",
            )
        if self.wildcard_mode not in ("precision", "balanced", "explore"):
            raise RecordFormatError(
                f"unknown wildcard mode {self.wildcard_mode!r}; known: precision, balanced, explore",
                field="wildcard_mode",
            )
        if self.floor_mode not in FLOOR_MODES:
            raise RecordFormatError(
                f"unknown floor mode {self.floor_mode!r}; known: {', '.join(FLOOR_MODES)}", field="floor_mode"
            )
        for name in (
            "date_anchor",
            "fit_budget",
            "store_topic",
            "shared_names",
            "small_store_feedback",
            "turn_supersession",
            "past_tense",
            "project_filter",
            "correction_pairing",
            "exchanges",
            "excerpts",
        ):
            if not isinstance(getattr(self, name), bool):
                raise RecordFormatError(f"must be true or false, got {getattr(self, name)!r}", field=name)
        if self.retrieval is not None and not isinstance(self.retrieval, RetrievalConfig):
            raise RecordFormatError(
                f"expected a RetrievalConfig, got {type(self.retrieval).__name__}", field="retrieval"
            )
        if (
            isinstance(self.log_max_bytes, bool)
            or not isinstance(self.log_max_bytes, int)
            or (self.log_max_bytes < MIN_MAX_BYTES)
        ):
            raise RecordFormatError(
                f"must be an integer of at least {MIN_MAX_BYTES} bytes, got {self.log_max_bytes!r}",
                field="log_max_bytes",
            )
        if self.policy not in POLICIES:
            raise RecordFormatError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}", field="policy")

    @classmethod
    def from_file(cls, path: Path | str) -> RecallConfig:
        """A YAML or JSON file: top-level config fields plus a ``weights`` mapping."""

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise RecordFormatError(f"not valid YAML/JSON: {exc}", path=str(path)) from None
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def from_mapping(cls, data: Any, *, source: str | None = None) -> RecallConfig:
        if not isinstance(data, dict):
            raise RecordFormatError("expected a mapping", path=source)
        data = dict(data)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise RecordFormatError(f"unknown setting(s) {sorted(unknown)}", path=source, field=sorted(unknown)[0])
        weights = ResonanceWeights.from_mapping(data.pop("weights", {}) or {}, source=source)
        retrieval = data.pop("retrieval", None)
        if retrieval is not None:
            if not isinstance(retrieval, Mapping):
                raise RecordFormatError("expected a mapping of RetrievalConfig fields", path=source, field="retrieval")
            try:
                data["retrieval"] = RetrievalConfig.from_mapping(retrieval, source=f"{source or 'recall'}: retrieval")
            except ParameterError as exc:
                raise RecordFormatError(exc.reason, path=source, field=f"retrieval.{exc.item}") from None
        try:
            return cls(weights=weights, **data)
        except RecordFormatError as exc:
            raise RecordFormatError(exc.reason, path=source, field=exc.field) from None
        except TypeError as exc:
            raise RecordFormatError(str(exc), path=source) from None


POLICIES = ("fixed-k", "adaptive", "none")
