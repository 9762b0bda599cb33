"""Resonance-weighted recall: what comes back into the working set, why, and at what cost.

    R(m, c) = alpha*S + beta*E + gamma*T + delta*A + epsilon*Q - lambda*K

Every term is its own function below and lies in [0, 1] (K in [0, 1] too). The
bound that matters most, *relevance dominates and learned signals only tilt*: the
tilt a candidate can earn from E, T, A and Q is at most ``beta + gamma + delta +
epsilon`` (the weights' ``tilt_bound``), so a candidate whose similarity is lower
by more than ``tilt_bound / alpha`` can never outrank a more relevant one, however
much history it has accumulated. The defaults give a bound of 0.20 on S in [0, 1].

After scoring: a similarity floor, risk filters, per-source quotas, a per-item
character cap, MMR diversification, and fitting to a token budget without cutting
an item mid-text. Every candidate is logged with each term, whether it was
injected, and why not.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from lca.activation import WILDCARD_MODES, Access, activation_term, base_level_activation, query_shape, ucb_bonus
from lca.errors import RecordFormatError
from lca.types import SourceType, as_utc

TERMS = ("similarity", "experience", "temporal", "authority", "task", "activation", "risk")


@dataclass(frozen=True)
class ResonanceWeights:
    """alpha..lambda of the resonance score; any may be set to zero to ablate its term."""

    similarity: float = 1.0   # alpha
    experience: float = 0.05  # beta
    temporal: float = 0.05    # gamma
    authority: float = 0.05   # delta
    task: float = 0.05        # epsilon
    activation: float = 0.0   # zeta: living-memory base-level activation, off unless the variant asks
    risk: float = 1.0         # lambda

    def __post_init__(self) -> None:
        for name in TERMS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RecordFormatError(f"weight must be a number, got {value!r}", field=name)
            if not math.isfinite(value) or value < 0:
                raise RecordFormatError(f"weight must be finite and >= 0, got {value!r}", field=name)

    @property
    def tilt_bound(self) -> float:
        """The most E, T, A, Q and activation together can add to a candidate's score."""
        return self.experience + self.temporal + self.authority + self.task + self.activation

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str | None = None) -> "ResonanceWeights":
        unknown = set(data) - set(TERMS)
        if unknown:
            raise RecordFormatError(f"unknown term(s) {sorted(unknown)}; known: {', '.join(TERMS)}", path=source,
                                    field=sorted(unknown)[0])
        try:
            return cls(**{k: data[k] for k in data})
        except RecordFormatError as exc:
            raise RecordFormatError(exc.reason, path=source, field=exc.field) from None

    def with_overrides(self, overrides: Mapping[str, float]) -> "ResonanceWeights":
        return ResonanceWeights.from_mapping({**asdict(self), **overrides})


@dataclass(frozen=True)
class RecallConfig:
    """Everything recall does besides weighting; parameters are plain numbers and strings."""

    weights: ResonanceWeights = field(default_factory=ResonanceWeights)
    pool: int = 50
    floor: float = 0.50
    memory_quota: int = 4
    transcript_quota: int = 2
    item_char_cap: int = 800
    mmr_lambda: float = 0.75
    token_budget: int = 1200
    lexical_share: float = 0.25  # S = (1 - share) * cosine + share * BM25 normalized within the pool
    half_life_days: float = 30.0
    policy: str = "fixed-k"
    wildcard_mode: str = "precision"  # precision (none) | balanced | explore: share of slots for dormant records
    authority_table: Mapping[str, float] | None = None  # overrides DEFAULT_AUTHORITY rows

    def __post_init__(self) -> None:
        checks = {"pool": self.pool >= 1, "memory_quota": self.memory_quota >= 0,
                  "transcript_quota": self.transcript_quota >= 0, "item_char_cap": self.item_char_cap >= 1,
                  "token_budget": self.token_budget >= 0, "floor": -1.0 <= self.floor <= 1.0,
                  "mmr_lambda": 0.0 <= self.mmr_lambda <= 1.0, "lexical_share": 0.0 <= self.lexical_share <= 1.0,
                  "half_life_days": self.half_life_days > 0}
        for name, ok in checks.items():
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value) or not ok:
                raise RecordFormatError(f"invalid value {value!r}", field=name)
        for key, value in (self.authority_table or {}).items():
            if key not in DEFAULT_AUTHORITY:
                raise RecordFormatError(f"unknown authority row {key!r}; known: {', '.join(DEFAULT_AUTHORITY)}",
                                        field=f"authority_table.{key}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise RecordFormatError(f"must be a number in [0, 1], got {value!r}", field=f"authority_table.{key}")
        if self.wildcard_mode not in ("precision", "balanced", "explore"):
            raise RecordFormatError(f"unknown wildcard mode {self.wildcard_mode!r}; known: precision, balanced, "
                                    "explore", field="wildcard_mode")
        if self.policy not in POLICIES:
            raise RecordFormatError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}", field="policy")

    @classmethod
    def from_file(cls, path: Path | str) -> "RecallConfig":
        """A YAML or JSON file: top-level config fields plus a ``weights`` mapping."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise RecordFormatError(f"not valid YAML/JSON: {exc}", path=str(path)) from None
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def from_mapping(cls, data: Any, *, source: str | None = None) -> "RecallConfig":
        if not isinstance(data, dict):
            raise RecordFormatError("expected a mapping", path=source)
        data = dict(data)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise RecordFormatError(f"unknown setting(s) {sorted(unknown)}", path=source, field=sorted(unknown)[0])
        weights = ResonanceWeights.from_mapping(data.pop("weights", {}) or {}, source=source)
        try:
            return cls(weights=weights, **data)
        except RecordFormatError as exc:
            raise RecordFormatError(exc.reason, path=source, field=exc.field) from None
        except TypeError as exc:
            raise RecordFormatError(str(exc), path=source) from None


POLICIES = ("fixed-k", "adaptive", "none")


# ---- the terms -------------------------------------------------------------------------
def similarity_term(cosine: float, lexical_norm: float, *, lexical_share: float) -> float:
    """S: hybrid similarity in [0, 1]: the dense cosine (clipped at 0) blended with BM25 normalized
    by the best BM25 score in the candidate pool."""
    return (1.0 - lexical_share) * max(0.0, cosine) + lexical_share * lexical_norm


EXPERIENCE_EVENT_WEIGHTS = {"used": 1.0, "approved": 2.0, "prevented_mistake": 3.0, "corrected": -2.0,
                            "contradicted": -3.0}


def experience_term(counts: Mapping[str, int], *, normalization: str = "sigmoid", cap: float = 1.0) -> float:
    """E: learned retrieval metadata in [0, 1], from what happened to a memory, never from its content.

    Each event kind has a signed weight; counts enter through log1p so that repetition saturates.
    ``sigmoid`` maps the evidence to (0, 1) with 0.5 for no history; ``log`` to [0, 1] by
    log1p(positive evidence) / log1p(50); ``cap`` clips the raw evidence to [0, cap] / cap.
    """
    raw = sum(EXPERIENCE_EVENT_WEIGHTS.get(kind, 0.0) * math.log1p(max(0, n)) for kind, n in counts.items())
    if normalization == "sigmoid":
        return 1.0 / (1.0 + math.exp(-raw))
    if normalization == "log":
        return min(1.0, math.log1p(max(0.0, raw)) / math.log1p(50.0))
    if normalization == "cap":
        return min(max(raw, 0.0), cap) / cap
    raise RecordFormatError(f"unknown normalization {normalization!r}; known: sigmoid, log, cap",
                            field="normalization")


def temporal_term(age_days: float | None, experience: float, *, half_life_days: float) -> float:
    """T: a decaying boost in [0, 1]. Experience stretches the half-life (up to 5x), so a
    foundational decision outlives routine chatter of the same age."""
    if age_days is None:
        return 0.0
    stretched = half_life_days * (1.0 + 4.0 * max(0.0, experience - 0.5) * 2.0)
    return 0.5 ** (max(0.0, age_days) / stretched)


DEFAULT_AUTHORITY = {
    "memory:approved": 1.0, "memory:reviewed": 0.8, "memory:unreviewed": 0.6, "memory:inferred": 0.4,
    "transcript": 0.5, "summary": 0.3,
}


def authority_term(source_key: str, *, exact_wording: bool = False,
                   table: Mapping[str, float] = DEFAULT_AUTHORITY) -> float:
    """A: source authority from a table users can change; the raw transcript outranks every
    derived source when exact wording is asked for."""
    if exact_wording and source_key == "transcript":
        return 1.0
    return float(table.get(source_key, 0.0))


def task_term(item_tags: set[str], context_tags: set[str]) -> float:
    """Q: the share of the active task's markers (role, project, channel, command) the item carries."""
    if not context_tags:
        return 0.0
    return len(item_tags & context_tags) / len(context_tags)


SECRET_PATTERNS = (
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),                         # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),               # GitHub tokens
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),                    # OpenAI-style secret keys
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),            # Slack tokens
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),           # PEM private keys
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),  # JWTs
    re.compile(r"\b(?i:password|passwd|secret|api[_-]?key|token)\s*[:=]\s*\S{6,}"),
)


_ANY_SECRET = re.compile("|".join(f"(?:{p.pattern})" for p in SECRET_PATTERNS))


_SECRET_HINTS = ("akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "sk-", "xox", "-----begin", "eyj", "passw",
                 "secret", "api", "token")


def contains_secret(text: str) -> bool:
    """Any of SECRET_PATTERNS. A substring prefilter skips the regex for the (usual) text that
    holds none of the patterns' anchors; this check runs on every candidate of every recall."""
    lowered = text.lower()
    if not any(hint in lowered for hint in _SECRET_HINTS):
        return False
    return _ANY_SECRET.search(text) is not None


def risk_term(*, private_in_public: bool, secret: bool, superseded: bool, expired: bool,
              about_history: bool, conflict: bool = False, outside_role: bool = False) -> tuple[float, list[str]]:
    """K in [0, 1] and the reasons: a secret or a private fact in a public channel is maximal risk;
    a superseded or expired memory is maximal unless the query is about history."""
    reasons = []
    if secret:
        reasons.append("secret or credential")
    if private_in_public:
        reasons.append("private in a public channel")
    if (superseded or expired) and not about_history:
        reasons.append("superseded" if superseded else "expired")
    if conflict:
        reasons.append("unresolved conflict")
    if outside_role:
        reasons.append("outside the role's authority")
    if not reasons:
        return 0.0, []
    hard = {"secret or credential", "private in a public channel", "superseded", "expired"}
    return (1.0 if hard & set(reasons) else 0.5), reasons


def resonance_score(terms: Mapping[str, float], weights: ResonanceWeights) -> float:
    """R = alpha*S + beta*E + gamma*T + delta*A + epsilon*Q - lambda*K."""
    return (weights.similarity * terms["similarity"] + weights.experience * terms["experience"]
            + weights.temporal * terms["temporal"] + weights.authority * terms["authority"]
            + weights.task * terms["task"] + weights.activation * terms.get("activation", 0.0)
            - weights.risk * terms["risk"])


# ---- records ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RecallContext:
    """The turn recall serves: the query and the task markers around it."""

    query: str
    role: str | None = None
    project: str | None = None
    channel: str | None = None
    command: str | None = None
    public_channel: bool = False
    as_of: datetime | None = None
    about_history: bool = False
    exact_wording: bool = False
    continues_previous_task: bool = False
    previous_injection_used: bool | None = None

    def task_markers(self) -> set[str]:
        return {m.lower() for m in (self.role, self.project, self.channel, self.command) if m}


@dataclass(frozen=True)
class ScoredCandidate:
    """One candidate with every term, its score, and what became of it."""

    chunk_id: str
    source: str            # the pointer key
    source_type: str       # memory | transcript
    authority_key: str     # the authority table row it used
    text: str
    timestamp: str | None
    cosine: float
    terms: Mapping[str, float]
    score: float
    risk_reasons: tuple[str, ...] = ()
    injected: bool = False
    why_not: str | None = None
    tokens: int = 0
    trimmed: bool = False
    wildcard: bool = False

    def contribution(self, weights: ResonanceWeights) -> dict[str, float]:
        return {name: (-1 if name == "risk" else 1) * getattr(weights, name) * self.terms[name] for name in TERMS}


@dataclass(frozen=True)
class RecallResult:
    """What recall injected, what it left out and why, and the rendered block."""

    context: RecallContext
    policy: str
    action: str                     # inject | shrink | skip | defer | none
    items: tuple[ScoredCandidate, ...]
    candidates: tuple[ScoredCandidate, ...]
    tokens: int
    budget: int
    latency_ms: float
    block: str

    @property
    def omitted(self) -> tuple[ScoredCandidate, ...]:
        return tuple(c for c in self.candidates if not c.injected)


# ---- the pipeline ----------------------------------------------------------------------
def _age_days(timestamp: str | None, as_of: datetime) -> float | None:
    if not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return (as_utc(as_of) - as_utc(moment)).total_seconds() / 86400.0


def _trim(text: str, cap: int) -> tuple[str, bool]:
    """Shorten to ``cap`` characters at a word boundary, marked, so a trimmed item never reads as whole."""
    if len(text) <= cap:
        return text, False
    cut = text.rfind(" ", 0, cap - 6)
    cut = cut if cut > cap // 2 else cap - 6
    return text[:cut].rstrip() + " [...]", True


class Recaller:
    """Runs recall over one substrate's index, memory files and experience log.

    ``memory_files`` maps memory ids to loaded memory files; ``experience`` maps a target
    ("memory:<id>" or a transcript pointer key) to its event counts; ``count_tokens``
    counts tokens the way the host's model does (the caller supplies it).
    """

    def __init__(self, index, *, memory_files: Callable[[], Mapping[str, Any]],
                 experience: Callable[[], Mapping[str, Mapping[str, int]]], count_tokens: Callable[[str], int],
                 config: RecallConfig | None = None, log_path: Path | None = None, retrievals=None) -> None:
        self.index = index
        self.retrievals = retrievals
        self.memory_files = memory_files
        self.experience = experience
        self.count_tokens = count_tokens
        self.config = config or RecallConfig()
        self.log_path = log_path

    def recall(self, context: RecallContext, *, config: RecallConfig | None = None) -> RecallResult:
        cfg = config or self.config
        started = time.perf_counter()
        if cfg.policy == "none":
            return self._finish(context, cfg, "none", [], [], started)
        scored, vectors = self._score(context, cfg)
        action = "inject"
        quotas = {"memory": cfg.memory_quota, "transcript": cfg.transcript_quota}
        budget = cfg.token_budget
        if cfg.policy == "adaptive":
            best = max((c.cosine for c in scored), default=0.0)
            if best < cfg.floor:
                action = "skip"   # nothing relevant enough: inject nothing rather than noise
            elif context.continues_previous_task and context.previous_injection_used is False:
                action = "shrink"  # the last injection went unused on this same task: halve the offer
            elif context.continues_previous_task and context.previous_injection_used:
                action = "defer"   # the working set already holds what this task used: offer nothing new now
            elif not any(c.source_type == "memory" for c in scored):
                quotas["transcript"] += quotas["memory"]  # a role with no memories leans on its transcript
            if action == "shrink":
                quotas = {k: v // 2 for k, v in quotas.items()}
                budget //= 2
        if action in ("skip", "defer"):
            scored = [replace(c, why_not=c.why_not or f"adaptive policy: {action} this turn") for c in scored]
            return self._finish(context, cfg, action, [], scored, started, budget)
        selected, rest = self._select(scored, vectors, cfg, quotas, budget)
        return self._finish(context, cfg, action, selected, rest, started, budget)

    # -- scoring
    def _score(self, context: RecallContext, cfg: RecallConfig) -> tuple[list[ScoredCandidate], dict[str, np.ndarray]]:
        index = self.index
        qvec = index.query_vector(context.query)
        hits = index.search(context.query, k=cfg.pool, pool=cfg.pool, query_vector=qvec)
        if not hits:
            return [], {}
        vectors = index.vectors_for_hits(hits)
        best_lexical = max((h.lexical_score or 0.0 for h in hits), default=0.0) or 1.0
        as_of = context.as_of or datetime.now(timezone.utc)
        memories = self.memory_files()
        experience = self.experience()
        markers = context.task_markers()
        weights = cfg.weights
        history = self.retrievals.by_target() if self.retrievals is not None else {}
        now_s = time.time()
        authority_table = {**DEFAULT_AUTHORITY, **(cfg.authority_table or {})}
        out: list[ScoredCandidate] = []
        for hit in hits:
            cosine = float(vectors[hit.chunk_id] @ qvec)
            if hit.dense_score is not None:   # the chunk's best dense key: one of its sentences, if the store keys them
                cosine = max(cosine, float(hit.dense_score))
            lexical_norm = (hit.lexical_score or 0.0) / best_lexical
            s = similarity_term(cosine, lexical_norm, lexical_share=cfg.lexical_share)
            private_in_public = superseded = expired = conflict = outside_role = False
            if hit.pointer.source_type is SourceType.MEMORY:
                memory = memories.get(hit.pointer.memory_id)
                record = memory.record if memory is not None else None
                counts = experience.get(f"memory:{hit.pointer.memory_id}", {})
                authority_key = f"memory:{record.authority.value}" if record else "memory:unreviewed"
                tags = {t.lower() for t in (record.tags + record.projects)} if record else set()
                if record is not None:
                    private_in_public = context.public_channel and record.privacy.value != "public"
                    superseded = record.superseded_by is not None
                    expired = bool((record.valid_to and as_utc(record.valid_to) < as_utc(as_of)) or
                                   (record.valid_from and as_utc(record.valid_from) > as_utc(as_of)))
                    conflict = bool(record.conflicts)
                    outside_role = bool(context.role and record.roles and
                                        context.role.lower() not in {r.lower() for r in record.roles})
                source_type = "memory"
            else:
                counts = experience.get(hit.pointer.key(), {})
                authority_key, source_type = "transcript", "transcript"
                tags = {hit.channel.lower()} if hit.channel else set()  # a transcript turn carries its channel
            e = experience_term(counts)
            # ablating E (weight 0) also removes its modulation of T: no learned signal leaks through
            t = temporal_term(_age_days(hit.timestamp, as_of), e if weights.experience > 0 else 0.5,
                              half_life_days=cfg.half_life_days)
            a = authority_term(authority_key, exact_wording=context.exact_wording, table=authority_table)
            q = task_term(tags, markers)
            k, reasons = risk_term(private_in_public=private_in_public, secret=contains_secret(hit.text),
                                   superseded=superseded, expired=expired, about_history=context.about_history,
                                   conflict=conflict, outside_role=outside_role)
            act = 0.0
            if weights.activation > 0 or cfg.wildcard_mode != "precision":
                act = activation_term(base_level_activation(history.get(hit.pointer.key(), []), now_s))
            terms = {"similarity": s, "experience": e, "temporal": t, "authority": a, "task": q, "activation": act,
                     "risk": k}
            score = resonance_score(terms, weights)
            why_not = None
            if {"secret or credential", "private in a public channel"} & set(reasons):
                why_not = f"policy filter: {', '.join(reasons)}"
            elif {"superseded", "expired"} & set(reasons):
                why_not = f"policy filter: {', '.join(reasons)} (ask about history to see it)"
            elif cosine < cfg.floor:
                why_not = f"below the similarity floor ({cosine:.3f} < {cfg.floor:.2f})"
            out.append(ScoredCandidate(hit.chunk_id, hit.pointer.key(), source_type, authority_key, hit.text,
                                       hit.timestamp, cosine, terms, score, tuple(reasons), why_not=why_not))
        out.sort(key=lambda c: (-c.score, c.chunk_id))
        self._query_shape = query_shape(qvec)
        return out, vectors

    # -- selection
    def _select(self, scored: list[ScoredCandidate], vectors: Mapping[str, np.ndarray], cfg: RecallConfig,
                quotas: dict[str, int], budget: int) -> tuple[list[ScoredCandidate], list[ScoredCandidate]]:
        eligible = [c for c in scored if c.why_not is None]
        decided: dict[str, ScoredCandidate] = {c.chunk_id: c for c in scored if c.why_not is not None}
        chosen: list[ScoredCandidate] = []
        used = {"memory": 0, "transcript": 0}
        tokens = 0
        remaining = list(eligible)
        share, temperature = WILDCARD_MODES[cfg.wildcard_mode]
        n_wild = int(round(share * sum(quotas.values())))
        main_slots = sum(quotas.values()) - n_wild
        while remaining and len(chosen) < main_slots:
            # MMR: relevance against redundancy with what is already chosen
            def mmr(c: ScoredCandidate) -> float:
                if not chosen:
                    return c.score
                redundancy = max(float(vectors[c.chunk_id] @ vectors[s.chunk_id]) for s in chosen)
                return cfg.mmr_lambda * c.score - (1.0 - cfg.mmr_lambda) * redundancy

            best = min(remaining, key=lambda c: (-mmr(c), c.chunk_id))
            remaining.remove(best)
            if used[best.source_type] >= quotas[best.source_type]:
                decided[best.chunk_id] = replace(best, why_not=f"{best.source_type} quota "
                                                               f"({quotas[best.source_type]}) reached")
                continue
            text, trimmed = _trim(best.text, cfg.item_char_cap)
            cost = self.count_tokens(self._render_item(len(chosen) + 1, best, text))
            if tokens + cost > budget:
                decided[best.chunk_id] = replace(best, why_not=f"token budget: needs {cost}, "
                                                               f"{budget - tokens} of {budget} left")
                continue
            tokens += cost
            used[best.source_type] += 1
            chosen.append(replace(best, injected=True, tokens=cost, trimmed=trimmed, text=text))
        if n_wild:
            chosen, tokens = self._wildcards(remaining, decided, chosen, used, quotas, tokens, budget, n_wild,
                                             temperature, cfg)
        picked = {x.chunk_id for x in chosen}
        for c in remaining:
            if c.chunk_id in decided or c.chunk_id in picked:
                continue
            if used[c.source_type] >= quotas[c.source_type]:
                reason = f"{c.source_type} quota ({quotas[c.source_type]}) reached"
            else:
                reason = "not picked: the remaining slots are reserved for wildcards"
            decided[c.chunk_id] = replace(c, why_not=reason)
        rest = [decided[c.chunk_id] for c in scored if c.chunk_id in decided]
        return chosen, rest

    def _wildcards(self, remaining, decided, chosen, used, quotas, tokens, budget, n_wild, temperature, cfg):
        """Reserved slots for relevant but dormant records, by an exploration bonus that decays as
        a record is examined; each pick is labeled a wildcard."""
        history = self.retrievals.by_target() if self.retrievals is not None else {}
        examined = {key: sum(1 for a in accesses if a.wildcard) for key, accesses in history.items()}
        total = sum(examined.values())
        dormant = [c for c in remaining if c.terms.get("activation", 0.0) < 0.5]
        dormant.sort(key=lambda c: (-(c.score + ucb_bonus(examined.get(c.source, 0), total, temperature)),
                                    c.chunk_id))
        picked = 0
        for c in dormant:
            if picked >= n_wild:
                break
            if used[c.source_type] >= quotas[c.source_type]:
                continue
            text, trimmed = _trim(c.text, cfg.item_char_cap)
            item = replace(c, wildcard=True)
            cost = self.count_tokens(self._render_item(len(chosen) + 1, item, text))
            if tokens + cost > budget:
                decided[c.chunk_id] = replace(c, why_not=f"token budget (wildcard): needs {cost}")
                continue
            tokens += cost
            used[c.source_type] += 1
            picked += 1
            chosen.append(replace(item, injected=True, tokens=cost, trimmed=trimmed, text=text))
        return chosen, tokens

    @staticmethod
    def _render_item(number: int, item: ScoredCandidate, text: str) -> str:
        when = f", {item.timestamp}" if item.timestamp else ""
        label = "wildcard: dormant record offered for exploration, " if item.wildcard else ""
        return (f"[{number}] {item.source} ({label}{item.authority_key}, weight {item.score:.3f}{when})\n{text}\n")

    def _finish(self, context: RecallContext, cfg: RecallConfig, action: str, items: list[ScoredCandidate],
                rest: list[ScoredCandidate], started: float, budget: int | None = None) -> RecallResult:
        budget = cfg.token_budget if budget is None else budget
        tokens = sum(i.tokens for i in items)
        body = "".join(self._render_item(n, item, item.text) for n, item in enumerate(items, 1))
        block = (f"<recalled-context policy=\"{cfg.policy}\" action=\"{action}\" items=\"{len(items)}\" "
                 f"tokens=\"{tokens}/{budget}\">\n{body}</recalled-context>\n")
        ordered = sorted([*items, *rest], key=lambda c: (-c.score, c.chunk_id))
        result = RecallResult(context, cfg.policy, action, tuple(items), tuple(ordered), tokens, budget,
                              (time.perf_counter() - started) * 1000.0, block)
        if self.log_path is not None:
            self._log(result, cfg)
        if self.retrievals is not None and items:
            shape = getattr(self, "_query_shape", 0)
            self.retrievals.record(Access(i.source, time.time(), shape, i.wildcard) for i in items)
        return result

    def _log(self, result: RecallResult, cfg: RecallConfig) -> None:
        """One JSONL record per recall, one row per candidate: the raw material for fitting weights."""
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "at": time.time(), "query": result.context.query, "policy": result.policy, "action": result.action,
            "weights": asdict(cfg.weights), "floor": cfg.floor, "tokens": result.tokens, "budget": result.budget,
            "latency_ms": round(result.latency_ms, 3),
            "candidates": [{"chunk_id": c.chunk_id, "source": c.source, "cosine": round(c.cosine, 6),
                            "terms": {k: round(v, 6) for k, v in c.terms.items()}, "score": round(c.score, 6),
                            "injected": c.injected, "wildcard": c.wildcard, "why_not": c.why_not}
                           for c in result.candidates],
        }
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
