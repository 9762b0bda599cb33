"""What forgetting a memory record does to the insight engine's derived data (``lca.forget`` calls it).

The integration cycle's files rest on the records: a forgotten record's signature and refused answer are dropped
from ``signatures.jsonl`` and ``quarantine.jsonl`` (what ``distill`` keeps of current records, so a rebuild writes
the same bytes); the ledger takes one ``records_forgotten`` event, after which no hypothesis or schema counts the
record among its members (the ledger stays append-only); ``centrality.json`` and ``taxonomy.json`` are derived again
from what remains (with the config the last refresh recorded); and every cycle report under ``insight/cycles/``
has each string naming a forgotten record or holding a forgotten text replaced by ``FORGOTTEN`` (the report stays:
it is the history of what a cycle found). ``plan`` says what would change without changing anything (a dry run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.fileio import atomic_write_bytes
from lca.insight.centrality import CentralityConfig, refresh_centrality
from lca.insight.reconcile import MEMBER_PREFIX
from lca.insight.store import SignatureStore
from lca.insight.taxonomy import refresh_taxonomy
from lca.layout import StoreLayout
from lca.ledger import LearnedState, Ledger

FORGOTTEN = "[FORGOTTEN]"  # what a scrubbed string reads (lca.forget uses it too)
Holds = Callable[[str], bool]  # whether a string holds a forgotten text (lca.forget.Prints.holds)


@dataclass(frozen=True)
class InsightForgetting:
    """What forgetting ``records`` changes (or, in a dry run, would change) in the insight data: the files under
    ``insight/`` (store-relative) and the ledger entries whose member lists lose a record."""

    records: tuple[str, ...]
    files: tuple[str, ...]
    hypotheses: tuple[str, ...]
    schemas: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "records": list(self.records),
            "files": list(self.files),
            "hypotheses": list(self.hypotheses),
            "schemas": list(self.schemas),
        }


def _naming(records: Collection[str]) -> re.Pattern[str] | None:
    """A record id standing alone in a string (``record:<id>``, a list of ids, a claim naming it)."""
    if not records:
        return None
    ids = "|".join(re.escape(r) for r in sorted(records, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{ids})(?![\w.-])")


def _hit(records: Collection[str], holds: Holds) -> Holds:
    """Whether a string names a forgotten record or holds a forgotten text."""
    pattern = _naming(records)
    return lambda text: bool(pattern and pattern.search(text)) or holds(text)


def _scrub(value: Any, hit: Holds) -> Any:
    """``value`` with every string (and mapping key) ``hit`` holds replaced by ``FORGOTTEN``."""
    if isinstance(value, str):
        return FORGOTTEN if hit(value) else value
    if isinstance(value, list):
        return [_scrub(v, hit) for v in value]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = _scrub(key, hit)
            out[f"{new_key}-{len(out)}" if new_key in out else new_key] = _scrub(item, hit)
        return out
    return value


def _files(layout: StoreLayout) -> Iterator[Path]:
    if layout.insight.is_dir():
        for path in sorted(layout.insight.rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path


def _touched(state: LearnedState, records: Collection[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    named = {MEMBER_PREFIX + r for r in records}
    hypotheses = tuple(sorted(h.id for h in state.hypotheses.values() if h.members & named))
    schemas = tuple(sorted(s.id for s in state.schemas.values() if set(s.members) & set(records)))
    return hypotheses, schemas


def plan(home: Path | str, records: Collection[str], holds: Holds) -> InsightForgetting:
    """What forgetting ``records`` (and the texts ``holds`` recognizes) would change; nothing is written."""
    layout = StoreLayout(home)
    hit = _hit(records, holds)
    files = tuple(p.relative_to(layout.root).as_posix() for p in _files(layout) if hit(p.read_text("utf-8", "replace")))
    hypotheses, schemas = _touched(Ledger(home).state(), records)
    return InsightForgetting(tuple(sorted(records)), files, hypotheses, schemas)


def forget_records(home: Path | str, records: Collection[str], holds: Holds, *, by: str, why: str) -> InsightForgetting:
    """Drop and derive again every insight artefact resting on ``records`` (module doc); what changed."""
    if not records:  # a forgotten text in a cycle report is lca.forget's to scrub; nothing here rests on it
        return InsightForgetting((), (), (), ())
    layout = StoreLayout(home)
    before = {p: p.read_bytes() for p in _files(layout)}
    hypotheses, schemas = _touched(Ledger(home).state(), records)
    if hypotheses or schemas or any(r in Ledger(home).state().memories for r in records):
        Ledger(home).append(
            "records_forgotten",
            "forget",
            {
                "records": sorted(records),
                "hypotheses": list(hypotheses),
                "schemas": list(schemas),
                "by": by,
                "why": why,
            },
        )
    gone = set(records)
    store = SignatureStore(home)
    if layout.signatures.exists() or layout.signature_quarantine.exists():
        signatures = [r for r in store.signatures().values() if r.source not in gone]
        store.write(signatures, [q for q in store.quarantine().values() if q.source not in gone])
    if layout.insight_centrality.exists():
        refresh_centrality(home, config=_centrality_config(layout))
    if layout.insight_taxonomy.exists():
        refresh_taxonomy(home)
    hit = _hit(records, holds)
    if layout.integration_cycles.is_dir():
        for path in sorted(layout.integration_cycles.glob("*.json")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if not hit(text):
                continue
            try:
                new = json.dumps(_scrub(json.loads(text), hit), indent=2, sort_keys=True) + "\n"
            except ValueError:
                new = FORGOTTEN + "\n"
            atomic_write_bytes(path, new.encode("utf-8"))
    changed = tuple(
        p.relative_to(layout.root).as_posix()
        for p in sorted(set(before) | set(_files(layout)))
        if not p.exists() or before.get(p) != p.read_bytes()
    )
    return InsightForgetting(tuple(sorted(records)), changed, hypotheses, schemas)


def _centrality_config(layout: StoreLayout) -> CentralityConfig:
    """The config the last refresh recorded, so the file derived again is the one a refresh would write."""
    try:
        return CentralityConfig(**json.loads(layout.insight_centrality.read_text(encoding="utf-8"))["config"])
    except (ValueError, KeyError, TypeError):
        return CentralityConfig()
