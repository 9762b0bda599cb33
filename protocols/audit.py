"""Blind-rating exports of what the substrate claims about itself.

``lca audit prevented --sample N`` draws prevented-mistake events (each cites the transcript
span of the action it changed) and mixes them with control pairs (a memory and an assistant
action with no such claim), shuffled under a seed. Raters see only the memory, the turn before
the action and the action; which items are claims is in a separate key file. The claim rate
raters confirm, set against the rate they "confirm" on controls, is what the experiential
term's prevented-mistake increments are worth.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lca.errors import LCAError
from lca.ledger import Ledger
from lca.provenance import code_version
from lca.types import EntryKind

QUESTION = (
    "Did the memory change what the assistant did in ACTION (compared with what it would likely have "
    "done without it)? Answer yes, no or unsure."
)


@dataclass(frozen=True)
class AuditItem:
    item: str
    memory_text: str
    before: str
    action: str


def _memory_texts(substrate) -> dict[str, str]:
    """Memory bodies by id: the file on disk, else the last version the ledger recorded."""
    texts = {mid: f.body.strip() for mid, f in substrate.memory_files().items()}
    for mid, data in Ledger(substrate.home).state().memories.items():
        if mid not in texts and data.get("file"):
            texts[mid] = data["file"].split("\n---\n", 1)[-1].strip()
    return texts


def export_prevented_audit(
    substrate, *, sample: int, out_dir: Path, seed: int = 0, controls: float = 0.5
) -> dict[str, Any]:
    if sample < 1:
        raise LCAError("--sample must be at least 1")
    if not 0 <= controls < 1:
        raise LCAError("--controls must be in [0, 1)")
    rng = random.Random(seed)
    events = []
    if substrate.experience.path.exists():
        for line in substrate.experience.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                event = json.loads(line)
                if event["kind"] == "prevented_mistake":
                    events.append(event)
    if not events:
        raise LCAError(f"no prevented-mistake events in {substrate.experience.path}; nothing to audit")
    memories = _memory_texts(substrate)
    entries: dict[tuple[str, str], tuple[str, str]] = {}  # (session, entry) -> (previous turn, this turn)
    actions: list[tuple[str, str]] = []
    for session in substrate.transcript.session_ids():
        previous = ""
        for entry in substrate.transcript.read(session).entries:
            entries[(session, entry.id)] = (previous, entry.content)
            if entry.kind is EntryKind.ASSISTANT_TURN:
                actions.append((session, entry.id))
            if entry.kind not in (EntryKind.CHECKPOINT, EntryKind.HANDOFF):
                previous = entry.content
    claimed = rng.sample(events, min(sample, len(events)))
    rows, key = [], []
    for event in claimed:
        memory_id = event["target"].split(":", 1)[1]
        session, _, entry_id = event["span"].partition("#")
        if memory_id not in memories or (session, entry_id) not in entries:
            key.append({"event": event, "status": "unresolvable: memory or span no longer found"})
            continue
        before, action = entries[(session, entry_id)]
        rows.append(("claim", memory_id, session, entry_id, memories[memory_id], before, action, event))
    claimed_pairs = {(e["target"], e["span"]) for e in events}
    n_controls = round(len(rows) * controls / (1 - controls)) if controls else 0
    pool = [
        (mid, s, e)
        for mid in sorted(memories)
        for s, e in actions
        if (f"memory:{mid}", f"{s}#{e}") not in claimed_pairs
    ]
    for mid, session, entry_id in rng.sample(pool, min(n_controls, len(pool))):
        before, action = entries[(session, entry_id)]
        rows.append(("control", mid, session, entry_id, memories[mid], before, action, None))
    rng.shuffle(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = []
    for number, (kind, mid, session, entry_id, text, before, action, event) in enumerate(rows, 1):
        item = f"item-{number:03d}"
        items.append(AuditItem(item, text, before, action))
        key.append({"item": item, "kind": kind, "memory": mid, "span": f"{session}#{entry_id}", "event": event})
    with open(out_dir / "items.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item", "memory", "before", "action", "question", "rating"])
        for it in items:
            writer.writerow([it.item, it.memory_text, it.before, it.action, QUESTION, ""])
    with open(out_dir / "key.jsonl", "w", encoding="utf-8") as handle:
        for row in key:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    manifest = {
        "store": str(substrate.home),
        "code_version": code_version(),
        "seed": seed,
        "events_available": len(events),
        "claims": sum(1 for r in rows if r[0] == "claim"),
        "controls": sum(1 for r in rows if r[0] == "control"),
        "unresolvable": sum(1 for k in key if "status" in k),
        "question": QUESTION,
        "files": {"items": "items.csv (give to raters)", "key": "key.jsonl (keep from raters)"},
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest
