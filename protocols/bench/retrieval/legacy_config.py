"""The benchmark-only hybrid ranker's weights (``HybridConfig``) and dataset defaults: see ``legacy``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class HybridConfig:
    """The hybrid retriever's weights, in z units of the fused score. The per-dataset defaults
    (``HYBRID_DEFAULTS``) were chosen on the dev splits only; ``--set name=value`` overrides one."""

    fusion: str = "z"  # "z": z-scored dense + bm25_weight x z-scored BM25, then the rest below;
    # "rrf": the store's reciprocal-rank fusion of dense and BM25, nothing else
    bm25_weight: float = 0.5
    context_weight: float = 1.0  # the neighbour-context key, when the dataset builds one (LoCoMo)
    context_before: int = 1  # the context key holds this many turns before the unit (same session) ...
    context_after: int = 1  # ... and this many after
    anchor_weight: float = 4.0  # added on the day a temporal anchor points at
    feedback_weight: float = 0.6  # Rocchio feedback: the query vector plus w x the mean of the top units' vectors
    feedback_depth: int = 3  # how many top units feed back
    question_weight: float = 0.0  # subtracted from a turn that only asks (ends in "?", shares no photo): a question
    # states no fact, and it yields its place to the reply below
    reply_weight: float = 0.0  # a turn answering a question turn adds w x the question's positive score
    speaker_weight: float = 0.0  # added to the turns of the one speaker a question names
    sentences: bool = True  # each sentence of a unit is also a dense key (the unit scores as its best)
    names_in_dense_query: bool = True  # False: the speakers' names leave the embedded query (the speaker signal
    # carries them; a name otherwise pulls every turn of that speaker)

    def __post_init__(self) -> None:
        if self.fusion not in ("z", "rrf"):
            raise ValueError(f"fusion must be 'z' or 'rrf', not {self.fusion!r}")
        if self.feedback_depth < 1:
            raise ValueError(f"feedback_depth must be at least 1, not {self.feedback_depth}")
        if self.context_before < 0 or self.context_after < 0:
            raise ValueError(
                f"context_before and context_after must be at least 0, not "
                f"{self.context_before} and {self.context_after}"
            )

    def context_texts(self, texts: Sequence[str], session_of: Sequence[str], header: Sequence[str] = ()) -> list[str]:
        """Each unit's context key: the unit with its neighbours in the same session (and a header line per unit)."""
        n = len(texts)
        return [
            "\n".join(
                ([header[i]] if header else [])
                + [
                    texts[j]
                    for j in range(i - self.context_before, i + self.context_after + 1)
                    if 0 <= j < n and session_of[j] == session_of[i]
                ]
            )
            for i in range(n)
        ]

    def embeds_sentences(self, retriever: str) -> bool:
        """Sentence keys are built only where they are scored: z fusion in the hybrid (and resonance's tail)."""
        return self.sentences and self.fusion == "z" and retriever in ("hybrid", "resonance")

    def with_overrides(self, pairs: Sequence[str]) -> HybridConfig:
        """``name=value`` strings (from ``--set``) applied over this config, each checked by name and type
        (``lca.params``: an unknown name is refused with the list of every field)."""
        from lca.params import parse_assignments

        known = {f.name: str(f.type) for f in fields(self)}
        return replace(self, **parse_assignments(pairs, flag="--set", known=known))


# chosen on LongMemEval_S dev and LoCoMo (no other split was looked at); see docs/benchmarks.md
HYBRID_DEFAULTS = {
    "longmemeval": HybridConfig(),
    "locomo": HybridConfig(
        question_weight=2.0, reply_weight=0.3, speaker_weight=0.6, context_before=2, names_in_dense_query=False
    ),
}


SIGNAL_WEIGHTS = (
    "bm25_weight",
    "context_weight",
    "anchor_weight",
    "feedback_weight",
    "question_weight",
    "reply_weight",
    "speaker_weight",
)


def ablations(config: HybridConfig, *, uses: set[str]) -> dict[str, HybridConfig]:
    """One variant per part that is switched on in ``config`` and used by the run (``uses`` names the
    weights the run's units can act on): that part off, everything else as it is."""
    variants = {
        f"{name}=0": replace(config, **{name: 0.0}) for name in SIGNAL_WEIGHTS if name in uses and getattr(config, name)
    }
    if config.sentences:
        variants["sentences=off"] = replace(config, sentences=False)
    if not config.names_in_dense_query and "speaker_weight" in uses:
        variants["names_in_dense_query=on"] = replace(config, names_in_dense_query=True)
    return variants


def used_weights(dataset: str, *, context: bool, anchors: bool, units: str) -> set[str]:
    """The hybrid weights a run can act on, given what it built (``context``: it built context keys);
    the rest multiply a signal the run never builds. Each runner reports its set as ``weights_used``."""
    uses = {"bm25_weight", "feedback_weight"}
    if context:
        uses.add("context_weight")
    if anchors:
        uses.add("anchor_weight")
    if dataset == "locomo" and units == "turns":
        uses |= {"question_weight", "reply_weight", "speaker_weight"}
    elif dataset == "locomo" and units == "observations":
        uses.add("speaker_weight")
    return uses
