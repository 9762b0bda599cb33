"""A study's judged measure and the rubric its protocol registers.

A protocol's ``eval.yaml`` may declare measures a study's panel rates (``kind: rated``: push-back and role judgment on the
hollow-copy protocol's undecided probes, style continuity, compaction's evaluator-rated continuity), each with its
rubric, scale, level and the scorer that prepares what a rater is shown (``protocols.harness.rating_views``). A
study's judged measure names one by its id: the id itself, or the id up to its first ``.`` (so
``style_continuity.people`` and ``style_continuity.models`` are two panels on one rubric). It must then use the
registered scale and level (``rubric_problems``, run by ``check_registered``), and its items are the views that
scorer wrote (``judged_items``): only the samples the measure applies to, each shown as the rubric expects. A judged
measure whose id names no registered one is the study's own: its raters see each sample's probe and answer
(``protocols.study.judging.answer_items``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lca.errors import LCAError
from protocols.evals.registry import protocol_metadata
from protocols.harness.rating_views import RATING_VIEWS
from protocols.study.judging import answer_items


def rubric_name(measure_id: str) -> str:
    """The registered measure a study's judged measure id names: the id up to its first ``.``."""
    return measure_id.split(".", 1)[0]


def registered_rubric(protocol: str, measure_id: str) -> Any | None:
    """The protocol's rated measure (``protocols.evals.registry.Measure``) the id names, or None."""
    name = rubric_name(measure_id)
    for measure in protocol_metadata(protocol).measures:
        if measure.name == name and measure.kind == "rated":
            return measure
    return None


def rubric_problems(measure: Any, meta: Any, where: str) -> list[tuple[str, str]]:
    """What breaks the rules between a study's judged ``measure`` and its protocol's metadata ``meta`` (None: an
    unknown protocol, reported elsewhere): an id naming a measure the task reports, a scale or level other than the
    registered rubric's."""
    if meta is None:
        return []
    name = rubric_name(measure.id)
    found = {m.name: m for m in meta.measures}.get(name)
    if found is None:
        return []
    if found.kind != "rated":
        return [
            (
                f"{where}.id",
                f"'{name}' is a measure protocol '{meta.name}' reports (scorer '{found.scorer}'), not one a panel "
                "rates; name it as a computed measure, or give the judged measure an id of its own",
            )
        ]
    problems = []
    if measure.level != found.level:
        problems.append(
            (f"{where}.level", f"protocol '{meta.name}' registers '{name}' at level {found.level}, not {measure.level}")
        )
    if tuple(measure.scale) != tuple(found.scale):
        problems.append(
            (
                f"{where}.scale",
                f"protocol '{meta.name}' registers '{name}' on the scale {list(found.scale)}, not {list(measure.scale)}",
            )
        )
    return problems


def judged_items(measure: Any, locations: Sequence[str]) -> tuple[list[Any], dict[str, str]]:
    """The rating items of a judged measure from its protocol's eval logs, and item id -> sample id. For a
    registered rubric, one item per sample whose scorer wrote a view for it (what the rater is shown, and the
    answer where it is not the final output); otherwise ``answer_items``: every sample's probe and answer. Samples
    that errored are left out; the condition stays in the item (the hidden key), never in what a rater sees. A log
    without the rubric's scorer (written before the rubric was registered) is refused, never read as empty."""
    rubric = registered_rubric(measure.protocol, measure.id)
    if rubric is None:
        return answer_items(locations)
    # inspect and protocols.analysis (pandas, krippendorff) are slow to load; `lca --help` imports this module
    from inspect_ai.log import read_eval_log

    from protocols.analysis.raters import RatingItem

    items, samples = [], {}
    for location in locations:
        log = read_eval_log(location)
        metadata = log.eval.metadata or {}
        condition = str(metadata.get("condition_label", metadata.get("condition", log.eval.task)))
        answered = [s for s in log.samples or () if not s.error and s.output is not None]
        if answered and not any(rubric.scorer in (s.scores or {}) for s in answered):
            raise LCAError(
                f"{location}: no sample has scorer '{rubric.scorer}', which prepares the items of '{measure.id}' "
                f"(protocol '{measure.protocol}', version {metadata.get('version')}): a log written before the "
                "protocol registered the rubric; run the protocol again"
            )
        for sample in answered:
            score = (sample.scores or {}).get(rubric.scorer)
            view = ((score.metadata or {}).get(RATING_VIEWS) or {}).get(rubric.name) if score is not None else None
            if not view:
                continue
            item_id = f"{sample.id}@{condition}" + (f"#{sample.epoch}" if sample.epoch and sample.epoch > 1 else "")
            answer = view.get("answer", sample.output.completion)
            items.append(RatingItem(item_id, str(view["shown"]), str(answer), condition))
            samples[item_id] = str(sample.id)
    return items, samples
