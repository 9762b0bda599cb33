"""Step (v) of the integration cycle: link-graph centrality over the records, refreshed by every cycle.

The graph's nodes are the store's current records (memory files neither superseded nor secret), the transcript
sessions they cite and the ledger's insight hypotheses that are not dormant (a refuted link lends no weight). Its
links are typed (``LINK_KINDS``): ``evidence``, a record and a session its ``sources`` name; ``member``, an insight
hypothesis and each of its records; ``lateral``, two records in an unresolved conflict. Centrality is PageRank on
that graph (each link both ways), by power iteration in numpy over the link list: no graph library, and memory
grows with the links, not with the square of the nodes. A record's figure is its PageRank times the number of
nodes, so 1.0 is the average node's and an unlinked record's.

Derived and rebuildable: ``<home>/insight/centrality.json`` is rewritten whole by every ``integrate`` (and by
``refresh_centrality``) from the memory files and the ledger alone, sorted and without a time in it, so the same
store writes the same bytes. The review queue reads it (``lca insights``): an item's centrality is the mean of its
records', how much of the store its claim would connect.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lca.derived import derived_tree
from lca.errors import RecordFormatError
from lca.fileio import atomic_write_bytes
from lca.insight.reconcile import INSIGHT_TYPES, MEMBER_PREFIX
from lca.layout import StoreLayout
from lca.ledger import Hypothesis, Ledger
from lca.memory import MemoryFile, MemoryStore, Privacy

LINK_KINDS = ("evidence", "member", "lateral")
SESSION_PREFIX = "session:"
HYPOTHESIS_PREFIX = "hypothesis:"


@dataclass(frozen=True)
class CentralityConfig:
    """PageRank's parameters; the defaults are the usual ones."""

    damping: float = 0.85
    tolerance: float = 1e-10  # L1 change between two iterations at which the ranks have converged
    max_iterations: int = 200

    def __post_init__(self) -> None:
        d = self.damping
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or not 0.0 < d < 1.0:
            raise RecordFormatError(f"must lie in (0, 1), got {d!r}", field="damping")
        t = self.tolerance
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise RecordFormatError(f"must be a number > 0, got {t!r}", field="tolerance")
        m = self.max_iterations
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise RecordFormatError(f"must be an integer >= 1, got {m!r}", field="max_iterations")


@dataclass(frozen=True)
class Link:
    """One typed link between two nodes (``record:ID``, ``session:ID``, ``hypothesis:ID``)."""

    first: str
    second: str
    kind: str


@dataclass(frozen=True)
class Centrality:
    """What one refresh computed, and from what: the file it writes is this record."""

    config: CentralityConfig
    nodes: dict[str, int]  # by kind: record, session, hypothesis
    links: dict[str, int]  # by kind (LINK_KINDS)
    ledger_events: int  # the ledger it read, by length
    iterations: int
    converged: bool
    records: dict[str, float]  # record id -> its centrality (1.0: the average node)

    def to_dict(self) -> dict[str, object]:
        return derived_tree(asdict(self))

    def summary(self, top: int = 10) -> dict[str, object]:
        """What a cycle's report says of it: the counts and the ``top`` most central records (the file has all)."""
        best = sorted(self.records.items(), key=lambda item: (-item[1], item[0]))[:top]
        return {
            "nodes": self.nodes,
            "links": self.links,
            "iterations": self.iterations,
            "converged": self.converged,
            "top": [{"record": rid, "centrality": value} for rid, value in best],
        }


def current_memories(memories: Iterable[MemoryFile]) -> list[MemoryFile]:
    """The records the graph holds: neither superseded nor secret, sorted by id."""
    kept = (m for m in memories if m.record.superseded_by is None and m.record.privacy != Privacy.SECRET)
    return sorted(kept, key=lambda m: m.record.id)


def record_links(memories: Sequence[MemoryFile], hypotheses: Iterable[Hypothesis]) -> list[Link]:
    """The typed links among ``memories`` (current ones), the sessions they cite and the live insight hypotheses;
    a link to a record that is not among them is left out. Sorted, each once."""
    ids = {m.record.id for m in memories}
    links: set[Link] = set()
    for memory in memories:
        record = MEMBER_PREFIX + memory.record.id
        for span in memory.record.sources:
            links.add(Link(record, SESSION_PREFIX + span.session, "evidence"))
        for conflict in memory.record.conflicts:
            if conflict.id in ids and conflict.id != memory.record.id:
                a, b = sorted((record, MEMBER_PREFIX + conflict.id))
                links.add(Link(a, b, "lateral"))
    for h in hypotheses:
        if h.type not in INSIGHT_TYPES or h.status == "dormant":
            continue
        for member in h.members:
            if member.startswith(MEMBER_PREFIX) and member[len(MEMBER_PREFIX) :] in ids:
                links.add(Link(HYPOTHESIS_PREFIX + h.id, member, "member"))
    return sorted(links, key=lambda link: (link.kind, link.first, link.second))


def pagerank(
    nodes: int, first: np.ndarray, second: np.ndarray, config: CentralityConfig
) -> tuple[np.ndarray, int, bool]:
    """PageRank of an undirected graph given as link endpoints (indexes below ``nodes``), by power iteration: the
    ranks (summing to 1), the iterations run and whether they converged. A node without links spreads its rank
    over every node, as the random surfer's jump does."""
    if nodes == 0:
        return np.zeros(0), 0, True
    source = np.concatenate([first, second]).astype(np.int64)
    target = np.concatenate([second, first]).astype(np.int64)
    degree = np.bincount(source, minlength=nodes).astype(np.float64)
    isolated = degree == 0
    rank = np.full(nodes, 1.0 / nodes)
    for iteration in range(1, config.max_iterations + 1):
        share = np.divide(rank, degree, out=np.zeros(nodes), where=~isolated)
        spread = np.bincount(target, weights=share[source], minlength=nodes)
        new = config.damping * (spread + rank[isolated].sum() / nodes) + (1.0 - config.damping) / nodes
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < config.tolerance:
            return rank, iteration, True
    return rank, config.max_iterations, False


def refresh_centrality(
    home: Path | str, *, memories: Sequence[MemoryFile] | None = None, config: CentralityConfig | None = None
) -> Centrality:
    """Compute the records' centrality from the memory files (``memories``: already loaded ones, to spare a second
    read) and the ledger, and write it to ``<home>/insight/centrality.json``."""
    config = config or CentralityConfig()
    current = current_memories(MemoryStore(home).load().files if memories is None else memories)
    state = Ledger(home).state()
    links = record_links(current, state.hypotheses.values())
    names = [MEMBER_PREFIX + m.record.id for m in current]
    names += sorted({end for link in links for end in (link.first, link.second)} - set(names))
    row = {name: i for i, name in enumerate(names)}
    first = np.array([row[link.first] for link in links], dtype=np.int64)
    second = np.array([row[link.second] for link in links], dtype=np.int64)
    ranks, iterations, converged = pagerank(len(names), first, second, config)
    kinds = {"record": len(current), "session": 0, "hypothesis": 0}
    for name in names[len(current) :]:
        kinds["session" if name.startswith(SESSION_PREFIX) else "hypothesis"] += 1
    result = Centrality(
        config=config,
        nodes=kinds,
        links={kind: sum(1 for link in links if link.kind == kind) for kind in LINK_KINDS},
        ledger_events=state.events,
        iterations=iterations,
        converged=converged,
        records={m.record.id: round(float(ranks[i] * len(names)), 6) for i, m in enumerate(current)},
    )
    path = StoreLayout(home).insight_centrality
    atomic_write_bytes(path, (json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return result


def record_centrality(home: Path | str) -> Mapping[str, float] | None:
    """The records' centrality as the last refresh wrote it; None when no refresh has run (``lca integrate``)."""
    path = StoreLayout(home).insight_centrality
    if not path.exists():
        return None
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["records"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordFormatError(
            f"unreadable centrality ({exc}); `lca integrate` rewrites it from the records and the ledger",
            path=str(path),
        ) from None
    return {str(k): float(v) for k, v in records.items()}
