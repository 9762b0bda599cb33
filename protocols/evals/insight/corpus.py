"""The planted corpus: seeded records from domains with their own words, some told on one skeleton across domains.

Every record is one skeleton (a ``StructuralSignature`` in the closed vocabulary: variables, signed relations,
thresholds, dynamics) told in one domain's nouns with the structural phrases every domain shares
(``vocabulary.py``). Three kinds of record:

- **rhymes**: one skeleton told in two domains (a group of two records, or three in three domains), with disjoint
  words: the pairs across domains within a group are the gold, the pairs the integration cycle should surface;
- **topical neighbours**: an *anchor* in its own domain and a *borrower* labelled with another domain but written in
  the anchor's nouns, on a skeleton of its own: alike in words, different in structure (the trap of a detector that
  reads content alone);
- **noise**: one record on a skeleton of its own.

Skeletons are drawn at random and kept unique by their canonical text (``lca.insight.signatures.canonical_text``),
so two records share a skeleton exactly when the generator planted it: gold is exact, and ``gold_pairs`` reads it
off the records. Each record keeps its skeleton's signature: the generator's own signatures, which
``GeneratorSigner`` serves behind the ``StructuralSigner`` port as the measured comparison for a model's signer
(never a default: it only knows the texts it generated).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from lca.errors import LCAError, RecordFormatError
from lca.insight.signatures import (
    CONSEQUENCES,
    DYNAMICS,
    MAX_DYNAMICS,
    MAX_RELATIONS,
    MAX_THRESHOLDS,
    MAX_VARIABLES,
    THRESHOLD_SIDES,
    VARIABLE_KINDS,
    VARIABLE_NAMES,
    StructuralSignature,
    canonical_text,
)
from protocols.evals.insight import vocabulary as words

GENERATOR = "protocols.evals.insight.corpus"
GENERATOR_VERSION = "1"
ROLES = ("rhyme", "anchor", "borrower", "noise")
SIGNER_MODEL = "planted-generator/1"  # the generator's signatures, named as such wherever they are used
SIGNER_PROMPT = "generator-given/1"


@dataclass(frozen=True)
class CorpusSpec:
    """What one corpus is made of; the same spec and generator version give the same bytes."""

    corpus: str
    seed: int
    records: int
    domains: tuple[str, ...] = tuple(words.DOMAIN_NOUNS)
    rhyme_share: float = 0.1  # of records, in rhyme groups
    triple_share: float = 0.2  # of rhyme groups, told in three domains rather than two
    topical_share: float = 0.1  # of records, in anchor + borrower pairs

    def __post_init__(self) -> None:
        unknown = sorted(set(self.domains) - set(words.DOMAIN_NOUNS))
        if unknown or len(self.domains) < 3 or len(set(self.domains)) != len(self.domains):
            raise RecordFormatError(
                f"needs 3 or more distinct known domains ({', '.join(words.DOMAIN_NOUNS)}), got {list(self.domains)}",
                field="domains",
            )
        if isinstance(self.records, bool) or not isinstance(self.records, int) or self.records < 12:
            raise RecordFormatError(f"must be an integer >= 12, got {self.records!r}", field="records")
        for name in ("rhyme_share", "triple_share", "topical_share"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 0.5:
                raise RecordFormatError(f"must be a number in [0, 0.5], got {value!r}", field=name)


@dataclass(frozen=True)
class PlantedRecord:
    """One record with what the generator knows of it: its role, its group (rhyme group or topical pair) and its
    skeleton's signature."""

    corpus: str
    id: str
    domain: str
    text: str
    role: str
    group: str | None
    skeleton: str
    signature: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)


# ---- skeletons ------------------------------------------------------------------------------------------------
def random_signature(rng: random.Random) -> StructuralSignature:
    """One skeleton drawn from the closed vocabulary (two or three variables most often)."""
    n = rng.choices((1, 2, 3, 4), weights=(1, 4, 4, 2))[0]
    names = list(VARIABLE_NAMES[:n])
    variables = [{"name": v, "kind": rng.choice(VARIABLE_KINDS)} for v in names]
    possible = [(a, b) for a in names for b in names if a != b] or [(names[0], names[0])]
    wanted = min(len(possible), MAX_RELATIONS, rng.randint(1, n + 1))
    relations = [
        {"source": a, "effect": rng.choice(("increases", "decreases")), "target": b}
        for a, b in sorted(rng.sample(possible, wanted))
    ]
    thresholds = [
        {"variable": v, "side": rng.choice(THRESHOLD_SIDES), "consequence": rng.choice(CONSEQUENCES)}
        for v in sorted(rng.sample(names, min(len(names), rng.choice((0, 1, 1, 2)), MAX_THRESHOLDS)))
    ]
    dynamics = sorted(rng.sample(DYNAMICS, rng.randint(1, MAX_DYNAMICS - 1)))
    assert n <= MAX_VARIABLES
    return StructuralSignature.model_validate(
        {"variables": variables, "relations": relations, "thresholds": thresholds, "dynamics": dynamics}
    )


def render(signature: StructuralSignature, nouns: Sequence[str], place: str, rng: random.Random) -> str:
    """The skeleton told in ``nouns`` (one per variable, in order) with the shared structural phrases."""
    named = {v.name: nouns[i] for i, v in enumerate(signature.variables)}
    sentences = []
    for r in signature.relations:
        if r.source == r.target:
            pattern = rng.choice(words.SELF_INCREASE if r.effect == "increases" else words.SELF_DECREASE)
            sentences.append(pattern.format(a=named[r.source]))
        else:
            verb = rng.choice(words.INCREASE_VERBS if r.effect == "increases" else words.DECREASE_VERBS)
            sentences.append(f"{named[r.source]} {verb} {named[r.target]}")
    for t in signature.thresholds:
        opening = rng.choice(words.THRESHOLD_OPENINGS[t.side]).format(a=named[t.variable])
        sentences.append(f"{opening}, {rng.choice(words.CONSEQUENCES[t.consequence])}")
    dynamics = " and ".join(rng.choice(words.DYNAMIC_PHRASES[d]) for d in signature.dynamics)
    sentences.append(f"over the season the whole {dynamics}")
    text = ". ".join(s[0].upper() + s[1:] for s in sentences) + "."
    return f"{place[0].upper()}{place[1:]}: {text}"


# ---- the corpus -----------------------------------------------------------------------------------------------
def generate(spec: CorpusSpec) -> list[PlantedRecord]:
    """The records of ``spec``, ids in a shuffled order that says nothing of their role."""
    rng = random.Random(f"{GENERATOR}/{GENERATOR_VERSION}/{spec.seed}")
    seen: set[str] = set()

    def fresh_skeleton() -> StructuralSignature:
        for _ in range(10_000):
            signature = random_signature(rng)
            key = canonical_text(signature)
            if key not in seen:
                seen.add(key)
                return signature
        raise LCAError(f"corpus {spec.corpus}: no unseen skeleton left after 10,000 draws")

    drafts: list[tuple[str, str | None, str, StructuralSignature, str]] = []  # role, group, domain, sig, noun domain
    rhyme_records = round(spec.records * spec.rhyme_share)
    group = 0
    while rhyme_records - sum(1 for d in drafts if d[0] == "rhyme") >= 2:
        left = rhyme_records - sum(1 for d in drafts if d[0] == "rhyme")
        size = 3 if left >= 3 and rng.random() < spec.triple_share else 2
        signature = fresh_skeleton()
        for domain in rng.sample(spec.domains, size):
            drafts.append(("rhyme", f"rhyme-{group:04d}", domain, signature, domain))
        group += 1
    for pair in range(round(spec.records * spec.topical_share) // 2):
        home, other = rng.sample(spec.domains, 2)
        drafts.append(("anchor", f"topical-{pair:04d}", home, fresh_skeleton(), home))
        drafts.append(("borrower", f"topical-{pair:04d}", other, fresh_skeleton(), home))
    while len(drafts) < spec.records:
        domain = rng.choice(spec.domains)
        drafts.append(("noise", None, domain, fresh_skeleton(), domain))
    rng.shuffle(drafts)
    out: list[PlantedRecord] = []
    texts: set[str] = set()
    topical_nouns: dict[str, list[str]] = {}
    for index, (role, group_id, domain, signature, noun_domain) in enumerate(drafts):
        n = len(signature.variables)
        if role in ("anchor", "borrower") and group_id in topical_nouns:
            nouns = topical_nouns[group_id][:n]  # the pair shares its nouns and place: alike in words
            place = topical_nouns[f"{group_id}/place"][0]
        else:
            nouns = rng.sample(words.DOMAIN_NOUNS[noun_domain], 4)
            place = rng.choice(words.DOMAIN_PLACES[noun_domain])
            if group_id is not None and role != "rhyme":
                topical_nouns[group_id], topical_nouns[f"{group_id}/place"] = nouns, [place]
        text = render(signature, nouns, place, rng)
        while text in texts:  # a text names its record for the generator's signer: never two alike
            text = render(signature, rng.sample(words.DOMAIN_NOUNS[noun_domain], 4), place, rng)
        texts.add(text)
        out.append(
            PlantedRecord(
                corpus=spec.corpus,
                id=f"{spec.corpus}-{index:05d}",
                domain=domain,
                text=text,
                role=role,
                group=group_id,
                skeleton=hashlib.sha256(canonical_text(signature).encode("utf-8")).hexdigest()[:16],
                signature=signature.model_dump(mode="json"),
            )
        )
    return out


def gold_pairs(records: Sequence[PlantedRecord]) -> set[tuple[str, str]]:
    """Every pair of records from different domains on one skeleton, as sorted id pairs (the rhymes)."""
    by_skeleton: dict[str, list[PlantedRecord]] = {}
    for record in records:
        by_skeleton.setdefault(record.skeleton, []).append(record)
    return {
        (min(a.id, b.id), max(a.id, b.id))
        for group in by_skeleton.values()
        for a, b in combinations(group, 2)
        if a.domain != b.domain
    }


def topical_pairs(records: Sequence[PlantedRecord]) -> set[tuple[str, str]]:
    """Each anchor with its borrower (alike in words, different in skeleton), as sorted id pairs."""
    groups: dict[str, list[str]] = {}
    for record in records:
        if record.role in ("anchor", "borrower") and record.group is not None:
            groups.setdefault(record.group, []).append(record.id)
    return {(min(ids), max(ids)) for ids in groups.values() if len(ids) == 2}


# ---- files ----------------------------------------------------------------------------------------------------
def write_corpus(records: Iterable[PlantedRecord], path: Path | str) -> str:
    """The records as JSON lines; returns the file's sha256."""
    data = "".join(record.to_json() + "\n" for record in records).encode("utf-8")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def load_corpora(path: Path | str) -> dict[str, list[PlantedRecord]]:
    """The corpora of a planted-corpus file by name, in file order; a bad line is refused naming file and line."""
    from lca.fileio import numbered_json_lines

    names = {f.name for f in PlantedRecord.__dataclass_fields__.values()}
    out: dict[str, list[PlantedRecord]] = {}
    source = Path(path)
    for number, raw in numbered_json_lines(source.read_text(encoding="utf-8"), str(source)):
        if not isinstance(raw, dict) or set(raw) != names:
            got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
            raise RecordFormatError(
                f"not a planted record (fields {sorted(names)}, got {got})", path=str(source), line=number
            )
        if raw["role"] not in ROLES:
            raise RecordFormatError(
                f"role must be one of {', '.join(ROLES)}, got {raw['role']!r}",
                path=str(source),
                line=number,
                field="role",
            )
        out.setdefault(raw["corpus"], []).append(PlantedRecord(**raw))
    return out


class GeneratorSigner:
    """The generator's own signatures behind the ``StructuralSigner`` port: the measured comparison for a model's
    signer on a planted corpus. It knows only the texts it generated and refuses any other (a counted
    ``generation_failed``): it is never a signer for a user's memories."""

    def __init__(self, records: Iterable[PlantedRecord]) -> None:
        self._by_text = {" ".join(r.text.split()): json.dumps(r.signature, sort_keys=True) for r in records}

    @property
    def model_id(self) -> str:
        return SIGNER_MODEL

    @property
    def prompt_version(self) -> str:
        return SIGNER_PROMPT

    def sign(self, text: str) -> str:
        try:
            return self._by_text[" ".join(text.split())]
        except KeyError:
            raise LCAError("the planted generator's signer knows only the texts it generated") from None
