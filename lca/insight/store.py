"""The records the integration cycle reads, and the derived files its signatures are kept in.

A record is a current memory file (``lca.memory``): not superseded, not secret, with a domain. Its domain is its
first project, else a ``domain:NAME`` tag; a record with neither has no domain to be cross-domain from and is
counted as skipped, never dropped unsaid. Its hash is the memory's content hash, so an edit makes a new signature.

``<home>/insight/signatures.jsonl`` holds one row per (record, record hash, model, prompt version) that validated;
``<home>/insight/quarantine.jsonl`` one per refused answer with its reason. Both are rewritten whole, sorted,
holding rows of current records only: with a deterministic signer a rebuild writes the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from lca.derived import derived_tree
from lca.errors import RecordFormatError
from lca.fileio import atomic_write_bytes, numbered_json_lines
from lca.layout import StoreLayout
from lca.memory import MemoryLoadResult, MemoryStore, Privacy

DOMAIN_TAG = "domain:"


@dataclass(frozen=True)
class InsightRecord:
    """One record as the integration cycle sees it."""

    id: str
    content_hash: str
    domain: str
    text: str


def domain_of(projects: Iterable[str], tags: Iterable[str]) -> str | None:
    """A record's domain: its first project, else its first ``domain:NAME`` tag, else None."""
    for project in projects:
        if project.strip():
            return project.strip()
    for tag in tags:
        if tag.startswith(DOMAIN_TAG) and tag[len(DOMAIN_TAG) :].strip():
            return tag[len(DOMAIN_TAG) :].strip()
    return None


def insight_records(
    home: Path | str, *, loaded: MemoryLoadResult | None = None
) -> tuple[list[InsightRecord], dict[str, int]]:
    """The store's current memories as records, sorted by id, and how many were skipped by reason (superseded,
    secret, no domain, unreadable); ``loaded``: the store's memory files already read, to spare a second read."""
    loaded = MemoryStore(home).load() if loaded is None else loaded
    skipped = {"superseded": 0, "secret": 0, "no_domain": 0, "unreadable": len(loaded.failures)}
    out = []
    for memory in loaded.files:
        record = memory.record
        if record.superseded_by is not None:
            skipped["superseded"] += 1
            continue
        if record.privacy == Privacy.SECRET:
            skipped["secret"] += 1
            continue
        domain = domain_of(record.projects, record.tags)
        if domain is None:
            skipped["no_domain"] += 1
            continue
        out.append(InsightRecord(record.id, memory.computed_hash, domain, memory.body.strip()))
    return sorted(out, key=lambda r: r.id), skipped


@dataclass(frozen=True)
class SignatureRow:
    """A validated signature and its provenance: which record (id and hash) it came from, which model under which
    prompt version made it, a digest of the raw answer, and how many domain words its pattern lost."""

    source: str
    source_hash: str
    domain: str
    model: str
    prompt_version: str
    answer_sha256: str
    signature: Mapping[str, Any]
    text: str  # the canonical text its space embeds (lca.insight.signatures.canonical_text)
    scrubbed_terms: int

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.source, self.source_hash, self.model, self.prompt_version)


@dataclass(frozen=True)
class QuarantinedAnswer:
    """A signer's answer refused by validation: the record, the signer, the reason and the answer (redacted)."""

    source: str
    source_hash: str
    model: str
    prompt_version: str
    reason: str
    message: str
    answer: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.source, self.source_hash, self.model, self.prompt_version)


_Row = TypeVar("_Row", SignatureRow, QuarantinedAnswer)


class SignatureStore:
    """The two derived files of signatures and refusals, read whole and written whole."""

    def __init__(self, home: Path | str) -> None:
        self.layout = StoreLayout(home)

    def signatures(self) -> dict[tuple[str, str, str, str], SignatureRow]:
        return {row.key: row for row in self._read(self.layout.signatures, SignatureRow)}

    def quarantine(self) -> dict[tuple[str, str, str, str], QuarantinedAnswer]:
        return {row.key: row for row in self._read(self.layout.signature_quarantine, QuarantinedAnswer)}

    def write(self, signatures: Iterable[SignatureRow], quarantine: Iterable[QuarantinedAnswer]) -> None:
        self._write(self.layout.signatures, sorted(signatures, key=lambda r: r.key))
        self._write(self.layout.signature_quarantine, sorted(quarantine, key=lambda r: r.key))

    @staticmethod
    def _read(path: Path, row_type: type[_Row]) -> list[_Row]:
        """Every row of a derived file; a row that is not one of ``row_type`` is refused naming the file and line."""
        if not path.exists():
            return []
        names = {f.name for f in fields(row_type)}
        out = []
        for number, raw in numbered_json_lines(path.read_text(encoding="utf-8"), str(path)):
            if not isinstance(raw, dict) or set(raw) != names:
                got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
                raise RecordFormatError(
                    f"not a {row_type.__name__} row (fields {sorted(names)}, got {got}); "
                    "`lca integrate --rebuild` rewrites the file from the records",
                    path=str(path),
                    line=number,
                )
            out.append(row_type(**raw))
        return out

    @staticmethod
    def _write(path: Path, rows: list[Any]) -> None:
        lines = [json.dumps(derived_tree(asdict(row)), sort_keys=True, ensure_ascii=False) for row in rows]
        atomic_write_bytes(path, ("".join(line + "\n" for line in lines)).encode("utf-8"))
