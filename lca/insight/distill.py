"""The distillation pass: every record without a signature for this signer gets one, or a counted refusal.

``SummarizerSigner`` is the default ``StructuralSigner``: the summarizer role (any ``TextGenerator``) asked for the
signature as JSON under ``SIGNATURE_JSON_SCHEMA`` (constrained decoding where the runtime has it), with one worked
example, at temperature 0 and a fixed seed so the same record gives the same answer. ``distill`` keeps what is
already stored for a record's current hash and this signer (a cache: no model call), asks the signer for the rest,
validates each answer (``lca.insight.signatures.validate_signature``) and stores the signature or quarantines the
answer with its reason. A refused record is not asked again by the same signer (same answer, same refusal) unless
``retry_quarantined``; ``rebuild`` discards this signer's rows and asks again for every record.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from lca.derived import derived_text
from lca.insight.signatures import (
    REFUSAL_REASONS,
    SIGNATURE_JSON_SCHEMA,
    canonical_text,
    counts_by_reason,
    validate_signature,
)
from lca.insight.store import InsightRecord, QuarantinedAnswer, SignatureRow, SignatureStore
from lca.ports import StructuralSigner, TextGenerator

SIGNATURE_PROMPT_VERSION = "insight-signature/1"
MAX_RECORD_CHARS = 1500  # the local model's context is small; a memory is a fact or a lesson, rarely longer
MAX_ANSWER_TOKENS = 448  # the longest answer the schema allows, about 1,000 characters
KEPT_ANSWER_CHARS = 600  # of a refused answer, in the quarantine file

SYSTEM = (
    "You describe the structure of a note, never its subject. Name up to four variables with the letters A to D, "
    "each with a kind: quantity, rate, resource, capacity, signal, pressure, population or agent. Say which "
    "variable increases or decreases which, any threshold where something collapses, switches, saturates, is "
    "released, shuts down or surges, and the dynamics of the whole. The pattern is one sentence in letters and "
    "structural words only: never a word of the note's topic. Answer with one JSON object."
)
DEMO_NOTE = (
    "When the reservoir rises above the spillway, water is released downstream. Rain fills the reservoir and "
    "evaporation drains it, faster when it is full."
)
DEMO_ANSWER = json.dumps(
    {
        "variables": [{"name": "A", "kind": "quantity"}, {"name": "B", "kind": "rate"}, {"name": "C", "kind": "rate"}],
        "relations": [
            {"source": "B", "effect": "increases", "target": "A"},
            {"source": "C", "effect": "decreases", "target": "A"},
            {"source": "A", "effect": "increases", "target": "C"},
        ],
        "thresholds": [{"variable": "A", "side": "above", "consequence": "release"}],
        "dynamics": ["accumulation", "equilibrium"],
        "pattern": "an inflow B fills A, an outflow C that grows with A drains it, and A is released above a limit",
    }
)


class SummarizerSigner:
    """``StructuralSigner`` over the summarizer role's ``TextGenerator``."""

    def __init__(self, generator: TextGenerator, *, max_tokens: int = MAX_ANSWER_TOKENS, seed: int = 0) -> None:
        self.generator = generator
        self.max_tokens = max_tokens
        self.seed = seed

    @property
    def model_id(self) -> str:
        return self.generator.model_id

    @property
    def prompt_version(self) -> str:
        return SIGNATURE_PROMPT_VERSION

    def messages(self, text: str) -> list[dict[str, str]]:
        note = " ".join(text.split())[:MAX_RECORD_CHARS]
        return [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Note: {DEMO_NOTE}"},
            {"role": "assistant", "content": DEMO_ANSWER},
            {"role": "user", "content": f"Note: {note}"},
        ]

    def sign(self, text: str) -> str:
        return self.generator.generate(
            self.messages(text),
            max_tokens=self.max_tokens,
            temperature=0.0,
            seed=self.seed,
            json_schema=SIGNATURE_JSON_SCHEMA,
        )


@dataclass(frozen=True)
class DistillReport:
    """What one pass did: signatures made and reused, refusals by reason (new this pass, and kept from before),
    domain words scrubbed from the patterns it made, and its time."""

    model: str
    prompt_version: str
    records: int
    signed: int
    reused: int
    refused: dict[str, int] = field(default_factory=dict)
    refused_before: int = 0
    scrubbed_terms: int = 0
    seconds: float = 0.0

    @property
    def valid_share(self) -> float | None:
        """Of the answers asked this pass, the share that validated (None when none was asked)."""
        asked = self.signed + sum(self.refused.values())
        return self.signed / asked if asked else None


def distill(
    home: Path | str,
    records: Sequence[InsightRecord],
    signer: StructuralSigner,
    *,
    rebuild: bool = False,
    retry_quarantined: bool = False,
    progress: bool = False,
) -> tuple[dict[str, SignatureRow], DistillReport]:
    """A signature for every record that validates, by record id, and the pass's report."""
    started = time.perf_counter()
    store = SignatureStore(home)
    current = {(r.id, r.content_hash) for r in records}
    mine = (signer.model_id, signer.prompt_version)
    # rows of records no longer current go (a forgotten or edited memory leaves no signature behind)
    kept = {k: r for k, r in store.signatures().items() if k[:2] in current and not (rebuild and k[2:] == mine)}
    held = {k: q for k, q in store.quarantine().items() if k[:2] in current and not (rebuild and k[2:] == mine)}
    out: dict[str, SignatureRow] = {}
    reasons: list[str] = []
    reused = refused_before = scrubbed = 0
    to_ask = []
    for record in records:
        key = (record.id, record.content_hash, *mine)
        if key in kept:
            out[record.id] = kept[key]
            reused += 1
        elif key in held and not retry_quarantined:
            refused_before += 1
        else:
            to_ask.append(record)
    for record in tqdm(to_ask, desc="structural signatures", unit="record", leave=False, disable=not progress):
        key = (record.id, record.content_hash, *mine)
        held.pop(key, None)
        try:
            answer = signer.sign(record.text)
        except Exception as exc:  # a failed call is a counted refusal, never a lost record
            reasons.append("generation_failed")
            held[key] = QuarantinedAnswer(*key, "generation_failed", derived_text(f"{type(exc).__name__}: {exc}"), "")
            continue
        signature, scrubbed_here, refusal = validate_signature(answer, record.text)
        if refusal is not None or signature is None:
            reason, message = (refusal.reason, refusal.message) if refusal else ("schema_invalid", "no signature")
            reasons.append(reason)
            held[key] = QuarantinedAnswer(*key, reason, message, answer[:KEPT_ANSWER_CHARS])
            continue
        scrubbed += scrubbed_here
        row = SignatureRow(
            source=record.id,
            source_hash=record.content_hash,
            domain=record.domain,
            model=signer.model_id,
            prompt_version=signer.prompt_version,
            answer_sha256=hashlib.sha256(answer.encode("utf-8")).hexdigest(),
            signature=signature.model_dump(mode="json"),
            text=canonical_text(signature),
            scrubbed_terms=scrubbed_here,
        )
        kept[row.key] = out[record.id] = row
    store.write(kept.values(), held.values())
    report = DistillReport(
        model=signer.model_id,
        prompt_version=signer.prompt_version,
        records=len(records),
        signed=len(to_ask) - len(reasons),
        reused=reused,
        refused=counts_by_reason(reasons, REFUSAL_REASONS),
        refused_before=refused_before,
        scrubbed_terms=scrubbed,
        seconds=time.perf_counter() - started,
    )
    return out, report
