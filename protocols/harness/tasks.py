"""The one shape every protocol task has: a named condition replayed over a dataset, then the probe."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import generate

from lca.index import embedders
from lca.index.embedder_choice import DEFAULT_EMBEDDER
from lca.provenance import code_version
from lca.retrieval import RetrievalConfig
from protocols.harness import solvers
from protocols.harness.solvers import answer_instruction, parse_params, replay_condition
from protocols.harness.variants import checked_condition, parse_variant, spec_assignments, variant_params

Loaded = tuple[Sequence[Any], str, dict[str, Any]]  # samples, the file's sha256, extra metadata


def embedder_id() -> str:
    """The id of the embedder the samples will use: the process's shared one when it is already set
    (a test's fake), else the default model's, named by the hash of its files without loading it; another
    embedder the process was told to use (``solvers.use_embedder``) is made, as the samples would make it."""
    if solvers._EMBEDDER is not None:
        return str(solvers._EMBEDDER.embedder_id)
    if solvers._EMBEDDER_NAME not in (None, DEFAULT_EMBEDDER):
        return str(solvers.shared_embedder().embedder_id)
    return _default_embedder_id()


@lru_cache(maxsize=1)
def _default_embedder_id() -> str:
    return embedders.SentenceTransformerEmbedder().embedder_id


def answered_without_model(state: Any, content: str) -> Any:
    """A substrate-level protocol's verdict set as the sample's output, no model called (zero tokens used)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    state.output = ModelOutput.from_content(model="none", content=content)
    state.output.usage = ModelUsage()
    state.completed = True
    return state


def condition_task(
    meta: Any,
    *,
    condition: str,
    params: str,
    seed: int,
    max_tokens: int,
    dataset: str | Path,
    dataset_name: str,
    load: Callable[[], Loaded],
    scorers: Callable[[], list],
    instruction: str | None = None,
    solver: Callable[[str, dict[str, Any], int], list] | None = None,
    retrieval: RetrievalConfig | None = None,
    recall_weights: Mapping[str, float] | None = None,
):
    """An inspect Task for the protocol ``meta`` describes (its ``ProtocolMetadata``: name, version,
    datasets). ``condition`` is a registered name or a variant label (``full-lca[weights.temporal=0]``,
    ``protocols.harness.variants``), whose bracketed parameters override ``params``; the task is named
    ``<protocol>-<label>``, so variants of one condition are distinct tasks of one eval set. A bad condition
    name or parameter is refused first, before the dataset is even loaded. Its metadata records the
    protocol and its version, the condition, its label and its resolved parameters, the dataset, its
    sha256 and which pinned official file it is (if any), the seed, the code revision, the embedder and
    when the task was made; the Task's own ``version`` is the protocol's. ``instruction``, when given, is
    appended to the question the agent model sees (after the condition has built its context from the question
    alone), the same for every condition: a protocol's answer format, never a hint. ``solver(condition, params,
    seed)``, when given, replaces the replay-then-generate chain with the protocol's own (the condition name and
    parameters resolved and checked as above). ``retrieval``, when given (a benchmark's ``retrieval.yaml``), is
    the ranking the substrate conditions' stores use, so the recall a condition injects is the recall that
    benchmark's retrieval figures measure; it is in the task's metadata, as is ``recall_weights`` (its
    ``recall-weights.yaml``), the resonance weights full-lca recalls by unless its ``weights`` parameter says
    otherwise."""
    variant = parse_variant(condition)
    parsed = parse_params(variant.condition, params)
    if variant.assignments:
        shared = spec_assignments(params, flag=f"condition '{variant.condition}' parameter")
        parsed = variant_params(variant, shared)
    resolved = checked_condition(variant.label, variant.condition, parsed).get_params()
    samples, sha256, metadata = load()
    pinned = {d.sha256: d.name for d in meta.datasets if d.sha256}
    return Task(
        dataset=MemoryDataset(list(samples), name=dataset_name),
        solver=solver(variant.condition, parsed, seed)
        if solver is not None
        else [
            replay_condition(variant.condition, parsed, seed, retrieval, recall_weights),
            *([answer_instruction(instruction)] if instruction else []),
            generate(),
        ],
        scorer=scorers(),
        config=GenerateConfig(temperature=0.0, seed=seed, max_tokens=max_tokens),
        name=f"{meta.name}-{variant.label}",
        version=meta.version,
        metadata={
            "protocol": meta.name,
            "version": meta.version,
            "condition": variant.condition,
            "condition_label": variant.label,
            "condition_params": resolved,
            "dataset": str(dataset),
            "dataset_sha256": sha256,
            "dataset_pinned_as": pinned.get(sha256),
            "seed": seed,
            "code_version": code_version(),
            "embedder": embedder_id(),
            "created_at": datetime.now(UTC).isoformat(),
            "answer_instruction": instruction,
            "retrieval_config": retrieval.to_dict() if retrieval is not None else None,
            "recall_weights": dict(recall_weights or {}),
            **metadata,
        },
    )
