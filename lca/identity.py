"""Layer 0: the standing identity, user and instruction files, written only through the approval gate.

They live under ``<home>/identity/`` as ``identity.md``, ``user.md`` and ``instructions.md``.
They are procedural: every write names its approver, archives the version it replaces and is
logged in the ledger with the full text and its hash, so an edit made around the gate is
visible (health compares each file with its last approved write). Without an approver, a
change is held as a proposal (``lca approve``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from lca.authority import WriterFence
from lca.errors import ApprovalRequired, LCAError
from lca.fileio import atomic_write_bytes
from lca.layout import StoreLayout
from lca.ledger import Ledger

IDENTITY_FILES = ("identity", "user", "instructions")


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class IdentityStore:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.layout = StoreLayout(self.root)
        self.dir = self.layout.identity
        self._fence = WriterFence(self.root)  # identity is authoritative state: only the active copy writes it

    def path_for(self, name: str) -> Path:
        if name not in IDENTITY_FILES:
            raise LCAError(f"unknown identity file {name!r}; known: {', '.join(IDENTITY_FILES)}")
        return self.layout.identity_file(name)

    def read(self, name: str) -> str:
        path = self.path_for(name)
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def standing(self) -> str:
        """The always-loaded identity block for the working set ('' when there are no files)."""
        texts = {name: self.read(name).strip() for name in IDENTITY_FILES}
        parts = [f"<{name}>\n{text}\n</{name}>" for name, text in texts.items() if text]
        return "\n".join(parts)

    def write(self, name: str, text: str, *, approver: str | None) -> Path:
        """The one write path; refused without a named approver."""
        path = self.path_for(name)
        if not (approver and approver.strip()):
            raise ApprovalRequired(f"identity file '{name}' is procedural: writing it needs a named approver")
        self._fence.check(f"write identity file '{name}'")
        if path.exists():
            previous = path.read_text(encoding="utf-8")
            archived = self.layout.identity_archive(name) / (_digest(previous).split(":")[1][:16] + ".md")
            if not archived.exists():
                atomic_write_bytes(archived, previous.encode("utf-8"))
        atomic_write_bytes(path, text.encode("utf-8"))
        Ledger(self.root).append(
            "identity_written", name, {"approver": approver.strip(), "content_hash": _digest(text), "text": text}
        )
        return path

    def propose(self, name: str, text: str, *, why: str) -> str:
        """Hold a change for approval; returns the proposal id."""
        self.path_for(name)
        self._fence.check(f"hold a proposal for identity file '{name}'")
        proposal_id = f"proposal-identity-{name}-{uuid.uuid4().hex[:6]}"
        payload = {
            "id": proposal_id,
            "kind": "identity",
            "name": name,
            "body": text,
            "why": why,
            "record": {"id": name, "type": "identity"},
            "base_hashes": {},
        }
        path = self.layout.proposal(proposal_id)
        atomic_write_bytes(path, json.dumps(payload, indent=2, sort_keys=True).encode())
        Ledger(self.root).append("proposal_held", proposal_id, {"path": str(path), "identity": name, "why": why})
        return proposal_id

    def edited_around_the_gate(self) -> list[str]:
        """Files whose content differs from their last approved write (or exist with none)."""
        last: dict[str, str | None] = {}
        for event in Ledger(self.root).events():
            if event.kind == "identity_written":
                last[event.subject] = event.data.get("content_hash")
        out = []
        for name in IDENTITY_FILES:
            path = self.path_for(name)
            if path.exists() and last.get(name) != _digest(path.read_text(encoding="utf-8")):
                out.append(str(path))
        return out
