"""Turns that lend a candidate their relevance: a correction scores with the turn it corrects, and a user's turn with
the agent's reply to it. Each is a turn whose own words resemble the question less than a neighbour's do, though it
is what the question needs."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from lca.recall.records import ScoredCandidate

FLOOR_REASON = "below the similarity floor"


def pair_corrections(
    out: list[ScoredCandidate],
    corrections: Mapping[str, Sequence[str]],
    risk_weight: float,
    clears: Callable[[ScoredCandidate], bool],
) -> list[ScoredCandidate]:
    """A turn that an explicit event corrected or superseded brings the turn that did it: the correction
    scores at least as the turn it corrects and clears the floor with it. Its words ("It came out in
    2019.", "Not from there: hotfixes start from release/2.x.") resemble the question less than the mistake
    does, yet it is what the question needs, whether the mistake is held back (turn_supersession) or shown
    beside it (transcript-recall). The score it inherits is the corrected turn's before the risk term held
    that turn back. A corrected turn brings its correction only where it cleared the floor itself (``clears``): a
    policy filter (superseded) is decided before the floor, so it says nothing of whether the turn was relevant."""
    if not corrections:
        return out
    by_turn = {c.source.split("[", 1)[0]: n for n, c in enumerate(out) if c.source_type == "transcript"}
    for c in list(out):
        if c.source_type != "transcript":
            continue
        relevant = c.why_not is None or (c.why_not.startswith("policy filter") and clears(c))
        inherited = c.score + risk_weight * c.terms.get("risk", 0.0)
        for span in corrections.get(c.source.split("[", 1)[0], ()):
            n = by_turn.get(f"transcript:{span}")
            if n is None:
                continue
            k = out[n]
            why = None if relevant and (k.why_not or "").startswith(FLOOR_REASON) else k.why_not
            if inherited > k.score or why != k.why_not:
                out[n] = replace(k, score=max(k.score, inherited), why_not=why)
    return out


def inherit_from_replies(
    out: list[ScoredCandidate],
    before: Mapping[str, str],
    agent: Collection[str],
    share: float,
    alpha: float,
) -> list[ScoredCandidate]:
    """A user's turn scores as if its similarity were at least ``share`` of the agent's reply to it (``before``:
    chunk -> the chunk right before it in its session; ``agent``: the chunks the agent wrote), and clears the floor
    with a reply that cleared it. The reply restates the turn in fuller words ("That's a solid plan for fuelling"
    after "one gel every 40 minutes"), so a question in other words than the user's finds the reply; the turn is
    the source, and the reply holds K for being the agent's own words. ``alpha`` is the similarity's weight: an
    ablated S lends nothing."""
    if share <= 0 or alpha <= 0 or not agent:
        return out
    at = {c.chunk_id: n for n, c in enumerate(out)}
    replies: dict[str, list[ScoredCandidate]] = {}  # prompt -> the chunks of its reply (a long reply is several)
    for reply_id in agent:
        prompt_id = before.get(reply_id)
        if prompt_id is not None and prompt_id not in agent and prompt_id in at and reply_id in at:
            replies.setdefault(prompt_id, []).append(out[at[reply_id]])
    # each prompt borrows once, from its best chunk: one that cleared the floor first, then the most similar
    lent = {p: max(rs, key=lambda r: (r.why_not is None, r.terms["similarity"])) for p, rs in replies.items()}
    for prompt_id, reply in lent.items():
        prompt = out[at[prompt_id]]
        gain = alpha * max(0.0, share * reply.terms["similarity"] - prompt.terms["similarity"])
        why = prompt.why_not
        if reply.why_not is None and (why or "").startswith(FLOOR_REASON):
            why = None
        if gain > 0 or why != prompt.why_not:
            out[at[prompt_id]] = replace(prompt, score=prompt.score + gain, why_not=why)
    return out
