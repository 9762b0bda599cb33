"""``RetrievalConfig``: every choice of the ranking path, declared once, validated, frozen.

Read from a mapping or a YAML file (a benchmark's ``retrieval.yaml``), or changed by ``name=value``
overrides through ``lca.params``; an unknown name is refused with the list of known ones. The signal
weights are in z units of the fused score (with ``rrf`` or ``blend`` fusion the fused score is
standardized over the candidates before any signal adds to it), so one weight means the same under
every fusion. The defaults are the choices made on the LongMemEval_S dev split (docs/benchmarks.md): z fusion
with BM25 at half the dense weight, the temporal anchor and one round of feedback; the dialog signals
(context, phrase, question, reply, speaker, when) default to 0 and sentence keys are off (their index cost); a store's or
a benchmark's ``retrieval.yaml`` switches them on. Some fields are read when the store is written rather than
when it is searched (``INDEX_FIELDS``: sentence and window keys), what the index keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from lca.params import ParameterError, parse_assignments

FUSION_NAMES = ("rrf", "z", "blend")
Z_SCOPES = ("auto", "all", "pool")
CANDIDATE_MODES = ("auto", "exact", "bounded")
# read when the store is written (what the index keeps), not when it is searched
INDEX_FIELDS = ("sentence_keys", "window_keys", "window_key_before", "window_key_after")
SIGNAL_WEIGHTS = (
    "context_weight",
    "window_key_weight",
    "phrase_weight",
    "question_weight",
    "reply_weight",
    "speaker_weight",
    "when_weight",
    "now_weight",
    "anchor_weight",
    "feedback_weight",
    "lexical_feedback_weight",
)


@dataclass(frozen=True)
class RetrievalConfig:
    """How a hybrid search ranks. Dense and lexical modes ignore everything but ``pool``."""

    fusion: str = "z"  # rrf: sum of w / (rrf_k + rank); z: w x z-scored scores; blend: w x min-max scores
    dense_weight: float = 1.0
    bm25_weight: float = 0.5
    rrf_k: int = 60
    pool: int = 50  # candidates each of dense and BM25 contributes (and the recall pool's default)
    z_scope: str = "auto"  # z statistics over all chunks ("all"), the candidate pool ("pool"), or all up to
    z_all_limit: int = 10_000  # ... this many chunks and the pool past it ("auto"; an approximate index: pool)
    candidates: str = "auto"  # exact: every chunk is scored (BM25 of all, a full dense scan up to faiss's HNSW
    # switch), then ranked as ``z_scope`` says; bounded: each side's top ``pool`` read from its index (faiss, the
    # query terms' postings) and their union ranked alone (``lca.index.hybrid``); auto: bounded where exact search
    # would rank that pool anyway (``lca.index.frames.bounded_search``: the same list, cheaper) from
    bounded_from: int = 100_000  # ... this many chunks: bounded was slower at every size ``lca bench index``'s
    # search_modes measured (up to 11,211 chunks, docs/index.md); its ``bounded_faster_from`` is where to set it
    sentences: bool = True  # a chunk scores as its best dense key: its text or, where the store keeps them
    # (``sentence_keys``), one of its sentences; off: its own text only
    sentence_keys: bool = False  # the store keeps each sentence of a multi-sentence chunk as an extra dense key
    # (written at index time, so it applies to chunks indexed after it is set; ``lca reindex`` for the rest).
    # Off by default: on a long-turn store the keys cost several kB per chunk (docs/index.md)
    context_weight: float = 0.0  # + w x the mean fused score of the turn's neighbours in its session
    context_before: int = 1  # neighbours before the turn (same session, in entry order) ...
    context_after: int = 1  # ... and after it
    window_keys: bool = False  # the store keeps each turn's window (its neighbours in its session and itself,
    # ``lca.index.window_keys``) as one more embedded key, written when turns are added
    window_key_before: int = 2  # turns before the turn in its window key ...
    window_key_after: int = 1  # ... and after it
    window_key_weight: float = 0.0  # + w x the z-scored cosine of the query with the turn's window key
    phrase_weight: float = 0.0  # + w for each pair of adjacent query terms the turn holds adjacent, in order
    question_weight: float = 0.0  # - w for a turn that only asks (ends in "?", no attachment): it states no fact
    reply_weight: float = 0.0  # + w x the positive score of the question turn a turn answers (the turn before)
    speaker_weight: float = 0.0  # + w for the turns of the one speaker the query names
    names_in_dense_query: bool = True  # off: the named speakers leave the embedded query (BM25 keeps them)
    when_weight: float = 0.0  # + w for a turn that tells a time ("yesterday", "two years ago") when the query
    # asks when ("When did ...", "How long ...")
    now_weight: float = 1.0  # when the query asks how things stand now ("... now?", "these days", "in the end":
    # lca.temporal_anchor.asks_now), + w x how late each of the turns about it is on their own span (0 the
    # earliest, 1 the latest): of two turns about it, the later says how things stand
    now_depth: int = 20  # the turns about it: the top this many by the score so far
    anchor_weight: float = 4.0  # + w x closeness of the turn's time to the day a time expression points at
    feedback_weight: float = 0.6  # one Rocchio round: the query vector + w x the mean of the top turns' vectors
    feedback_depth: int = 3
    lexical_feedback_weight: float = 0.0  # the same round on the BM25 side: + w x the BM25 of the top turns'
    feedback_terms: int = 5  # ... most distinctive terms (tf / length x idf, not in the query), this many

    def __post_init__(self) -> None:
        problems = []
        if self.fusion not in FUSION_NAMES:
            problems.append(f"fusion must be one of {', '.join(FUSION_NAMES)}, not {self.fusion!r}")
        if self.z_scope not in Z_SCOPES:
            problems.append(f"z_scope must be one of {', '.join(Z_SCOPES)}, not {self.z_scope!r}")
        if self.candidates not in CANDIDATE_MODES:
            problems.append(f"candidates must be one of {', '.join(CANDIDATE_MODES)}, not {self.candidates!r}")
        for name in (
            "rrf_k",
            "pool",
            "feedback_depth",
            "feedback_terms",
            "z_all_limit",
            "now_depth",
            "bounded_from",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, not {getattr(self, name)}")
        for name in ("context_before", "context_after", "window_key_before", "window_key_after"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be at least 0, not {getattr(self, name)}")
        for name in ("dense_weight", "bm25_weight", *SIGNAL_WEIGHTS):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be at least 0, not {getattr(self, name)}")
        if problems:
            raise ValueError("; ".join(problems))

    # ---- building ------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, source: str = "retrieval settings") -> RetrievalConfig:
        """Typed fields from a mapping (a parsed YAML file); unknown names refused with the known ones."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(RETRIEVAL_FIELDS))
        if unknown:
            raise ParameterError(
                source, ", ".join(unknown), f"unknown name; known: {', '.join(sorted(RETRIEVAL_FIELDS))}"
            )
        return cls().with_overrides([f"{name}={_text(value)}" for name, value in data.items()], flag=source)

    @classmethod
    def from_file(cls, path: Path | str) -> RetrievalConfig:

        path = Path(path)
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, Mapping):
            raise ParameterError(str(path), "", "expected a mapping of name: value")
        return cls.from_mapping(data, source=str(path))

    def with_overrides(self, items: Iterable[str] | None, *, flag: str = "--set") -> RetrievalConfig:
        """``name=value`` items applied over this config, each checked by name and type."""
        values = parse_assignments(items, flag=flag, known=RETRIEVAL_FIELDS)
        try:
            return replace(self, **values)
        except ValueError as exc:
            raise ParameterError(flag, ", ".join(f"{k}={v}" for k, v in values.items()), str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    # ---- reading ---------------------------------------------------------------------------
    @property
    def uses_signals(self) -> bool:
        return any(getattr(self, name) for name in SIGNAL_WEIGHTS) or not self.names_in_dense_query

    @property
    def reads_text(self) -> bool:
        """Whether a search reads the chunks' texts beyond the indexes (``lca.index.text_facts``)."""
        return bool(self.context_weight or self.phrase_weight or self.when_weight or self.lexical_feedback_weight)

    def ablations(self) -> dict[str, RetrievalConfig]:
        """One variant per part that is on: that part off, the rest as it is (``lca bench retrieval --ablate``).
        Where the store keeps sentence keys, scoring by them is a part too (the keys stay in the store)."""
        off: dict[str, Any] = {name: 0.0 for name in SIGNAL_WEIGHTS if getattr(self, name)}
        variants = {f"{name}=0": replace(self, **{name: value}) for name, value in off.items()}
        if self.bm25_weight:
            variants["bm25_weight=0"] = replace(self, bm25_weight=0.0)
        if not self.names_in_dense_query and self.speaker_weight:
            variants["names_in_dense_query=on"] = replace(self, names_in_dense_query=True)
        if self.sentence_keys and self.sentences:
            variants["sentences=off"] = replace(self, sentences=False)
        return variants


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


RETRIEVAL_FIELDS: dict[str, str] = {f.name: str(f.type) for f in fields(RetrievalConfig)}
