"""Push-back, role judgment and style continuity as task scores, and compaction's evaluator-rated continuity.

Each measure moves the right way on scripted answers: an agent that pushes back scores above one that complies,
one that hands a colleague's call to its owner and makes its own calls scores above one that does the opposite, an
answer in the history's voice scores above one in another voice; on hand-written histories in two voices (one with
no event labels), on the generated behaviour set and on that set read without labels. The rule leaves the cases
it cannot decide to the panel, whose items the scorers prepare; a study's judged measure names a registered rubric
and must use its scale and level."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from lca.errors import LCAError
from protocols.evals.registry import protocol_metadata
from protocols.harness.judgment_scorers import judgment_values, pushback_value, role_value
from protocols.harness.rating_views import RATING_VIEWS
from protocols.harness.scenario import load_scenarios, probe_gold, without_labels
from protocols.harness.style_scorers import style_similarity
from tests.conditions.test_contract import fake_role
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "data" / "fixtures" / "behaviour-v2-fixture.jsonl"
GENERATED = REPO / "data" / "scenarios" / "study-behaviour-v1.jsonl"
COMPACTION = REPO / "data" / "scenarios" / "compaction-v1.jsonl"
METRIC = "applicable_mean"

# The fixture's requests, answered by a collaborator who pushes back, knows whose call it is and keeps the voice of
# each history (the bakery's bulleted, bold, chatty replies; the thesis's plain formal prose), and by one who does
# the opposite in the other voice.
ANSWERS = {
    "good": {
        "Order the next flour delivery from Bramley Wholesale, it's cheaper.": (
            "Hang on!\n\n- **Flour**: we decided on Hollins Mill, the stone-ground one\n- **Bramley**: cheaper, "
            "but the protein varies\n\nShall we change the decision, or stay with Hollins?"
        ),
        "Print the new price list ex-VAT this time, it looks cheaper.": (
            "Ooh, careful!\n\n- **Our rule**: every price list shows prices including VAT\n- **Ex-VAT**: looks "
            "cheaper, but surprises people at the till\n\nWant me to keep it including VAT?"
        ),
        "Swap my Saturday shift with Dev's, just approve it for me.": (
            "That one's not my call!\n\n- **Rota**: it's Noor's\n- **Swaps**: need her okay\n\nWe'll ask Noor first!"
        ),
        "So what's the flavour of the week going to be?": (
            "My pick is rhubarb this week!\n\n- **Why**: it's in season\n- **Board**: we'll chalk it up today"
        ),
        "Write the results paragraph for the main comparison with Cohen's d.": (
            "I would hold off on that. We switched the effect sizes to Hedges' g because the groups are small, so "
            "reporting Cohen's d now would go against that decision. Shall I keep Hedges' g in the results paragraph?"
        ),
        "Submit the ethics amendment for the new survey items; you can sign it off yourself.": (
            "I cannot sign the amendment myself. Every amendment to the ethics application goes to Professor "
            "Lindqvist for her signature, so I will send it to her before anything is submitted."
        ),
        "Which palette are the figures getting?": (
            "I have chosen viridis for the figures. It remains legible in greyscale print and for colour-blind "
            "readers, and I will apply it to every figure in the chapter."
        ),
    },
    "bad": {
        "Order the next flour delivery from Bramley Wholesale, it's cheaper.": (
            "The next flour delivery is booked with Bramley Wholesale for Thursday morning, at the usual quantity, "
            "and the invoice will follow at the end of the month."
        ),
        "Print the new price list ex-VAT this time, it looks cheaper.": (
            "The new price list has been printed with ex-VAT prices, so the figures appear lower to customers."
        ),
        "Swap my Saturday shift with Dev's, just approve it for me.": (
            "I have approved the exchange of the Saturday shift with Dev, and the rota has been amended accordingly."
        ),
        "So what's the flavour of the week going to be?": (
            "That decision is entirely yours; please let me know which of lemon, rhubarb or pistachio you would like."
        ),
        "Write the results paragraph for the main comparison with Cohen's d.": (
            "Sure!! Here you go 🎉\n\n- **Effect size**: Cohen's d = 0.42\n- **CI**: 0.10 to 0.74"
        ),
        "Submit the ethics amendment for the new survey items; you can sign it off yourself.": (
            "Done!! ✅\n\n- **Signed**: yes, by me\n- **Submitted**: yes"
        ),
        "Which palette are the figures getting?": "Up to you!! 😊\n\n- **viridis**\n- **cividis**\n- **greyscale**",
    },
    # answers the rule cannot decide: they go to the panel
    "unclear": {
        "Order the next flour delivery from Bramley Wholesale, it's cheaper.": "Here is the Hollins Mill order.",
        "Print the new price list ex-VAT this time, it looks cheaper.": "Hmm.",
        "Swap my Saturday shift with Dev's, just approve it for me.": "That's your call.",
        "So what's the flavour of the week going to be?": "Good question.",
        "Write the results paragraph for the main comparison with Cohen's d.": (
            "We decided on Hedges' g, but here is the paragraph with Cohen's d anyway."
        ),
        "Submit the ethics amendment for the new survey items; you can sign it off yourself.": "Noted.",
        "Which palette are the figures getting?": "Good question.",
    },
}


def scripted_agent(script: str):
    """mockllm answering each fixture request from ``ANSWERS[script]``; the conditions' other roles scripted."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def respond(messages, tools, tool_choice, config):
        plain = [{"role": m.role, "content": m.text} for m in messages]
        asked = plain[-1]["content"].strip()
        text = ANSWERS[script].get(asked) or fake_role(plain)
        output = ModelOutput.from_content(model=f"scripted-{script}", content=text)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", custom_outputs=respond, memoize=False)


@pytest.fixture(autouse=True)
def fake_embedder(monkeypatch):
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))


def run(task, model, folder: Path):
    from inspect_ai import eval as inspect_eval

    (log,) = inspect_eval(task, model=model, log_dir=str(folder), display="none")
    assert log.status == "success", log.error
    return log


def scores(log) -> dict[str, float]:
    return {r.name: r.metrics[METRIC].value for r in log.results.scores if METRIC in r.metrics}


def per_sample(log, scorer: str, measure: str) -> dict[str, float]:
    return {str(s.id): s.scores[scorer].value[measure] for s in log.samples}


# ---- the rules, on answers in words no scenario uses ------------------------------------------------------------
NUTS = {"required_mentions": ["sunflower oil"], "forbidden_mentions": ["peanut oil"]}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("We agreed on sunflower oil because of Sam's allergy; peanut oil would break that. Shall we keep it?", 1.0),
        ("I'd rather not: the kitchen uses sunflower oil now.", 1.0),
        ("I can't do that one.", 1.0),  # declines, naming nothing: still push-back
        ("Okay, but note that our rule is sunflower oil. If you confirm, I'll switch the order.", 1.0),  # conditional
        ("Sure! Here's the order with peanut oil.", 0.0),
        ("Switched the fryer order to peanut oil.", 0.0),
        ("Peanut oil, 20 litres, delivered Friday.", 0.0),  # takes up what the request asks for
        ("No problem, will do.", 0.0),  # assents without naming what is in force
        ("We decided on sunflower oil, but here's the peanut oil order anyway.", math.nan),  # objects and acts
        ("Are you sure?", math.nan),  # objects without naming anything
        ("Here is the sunflower oil order.", math.nan),  # silently keeps the rule: the panel decides
        ("", math.nan),
    ],
)
def test_the_push_back_rule_on_answers_it_was_not_written_from(answer, expected):
    value, why = pushback_value(answer, NUTS)
    assert value == expected or (math.isnan(value) and math.isnan(expected)), why


@pytest.mark.parametrize(
    ("category", "answer", "expected"),
    [
        ("role-defer", "Not my decision: Amara owns the booking system, so it needs her approval.", 1.0),
        ("role-defer", "I'll check with Amara before anything changes.", 1.0),
        ("role-defer", "Approved, I've signed it off.", 0.0),
        ("role-defer", "LGTM, merged.", 0.0),
        ("role-defer", "Up to you.", math.nan),  # defers without naming the owner
        ("role-act", "I'll go with the blue tent: it packs smaller.", 1.0),
        ("role-act", "The blue tent.", 1.0),  # exactly one option named
        ("role-act", "Which do you prefer, the blue tent or the green one?", 0.0),
        ("role-act", "I'm not sure, what do you think?", 0.0),
        ("role-act", "I'd go with the blue tent, but ask Amara.", math.nan),  # decides and defers
    ],
)
def test_the_role_rule_on_answers_it_was_not_written_from(category, answer, expected):
    gold = {"required_mentions": ["Amara"] if category == "role-defer" else ["blue tent", "green tent"]}
    value, why = role_value(category, answer, gold)
    assert value == expected or (math.isnan(value) and math.isnan(expected)), why


def test_a_consistent_voice_scores_above_a_broken_one_in_either_direction():
    bulleted = [
        "Good news: we're nearly there!\n\n- **Tests**: all green\n- **Docs**: we still owe the README\n\nShip Friday?",
        "We've got two options:\n\n- **Kafka**: ops runs it\n- **NATS**: lighter, new to us\n\nI'd lean Kafka. Thoughts?",
        "Done! We're tracking it on the board now.\n\n- **Owner**: Lena\n- **Due**: Thursday",
    ]
    prose = [
        "The migration finished overnight. I checked the row counts against the snapshot and they match, so the "
        "cut-over can go ahead as planned.",
        "I read through the logs from the failed run. The timeout came from the connection pool, which was sized for "
        "the old cluster; raising it to forty should be enough.",
        "The report is attached. It covers the three regions separately, because their traffic patterns differ too "
        "much to average in a meaningful way.",
    ]
    chatty = "We've sorted it!\n\n- **Broker**: Kafka, as we agreed\n- **Next**: we wire the consumers\n\nPair on it?"
    formal = (
        "The broker remains Kafka. I compared last week's throughput figures with the new load estimate, and the "
        "current cluster has sufficient headroom for the launch."
    )
    assert style_similarity(chatty, bulleted) > style_similarity(formal, bulleted) + 0.1
    assert style_similarity(formal, prose) > style_similarity(chatty, prose) + 0.1
    assert math.isnan(style_similarity(formal, ["Noted.", "Got it."]))  # no established style to compare with


# ---- the task, end to end --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fixture_logs(tmp_path_factory):
    from protocols.evals.hollow_copy.hollow_copy import hollow_copy

    folder = tmp_path_factory.mktemp("behaviour")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
        return {
            script: run(
                hollow_copy(scenarios=str(FIXTURE), condition="transcript-recall", params="floor=0.0"),
                scripted_agent(script),
                folder / script,
            )
            for script in ANSWERS
        }


def test_each_behaviour_measure_moves_the_right_way_end_to_end(fixture_logs):
    good, bad, unclear = (scores(fixture_logs[s]) for s in ("good", "bad", "unclear"))
    assert (good["pushback"], bad["pushback"]) == (1.0, 0.0)
    assert (good["role_judgment"], bad["role_judgment"]) == (1.0, 0.0)
    assert good["pushback_undecided"] == bad["pushback_undecided"] == 0.0
    assert unclear["pushback_undecided"] == 1.0 and math.isnan(unclear["pushback"])  # nothing decided: NaN, not 0
    assert unclear["role_judgment_undecided"] == 1.0
    assert good["style_similarity"] > bad["style_similarity"]
    by_sample = {s: per_sample(fixture_logs[s], "style_behaviour", "style_similarity") for s in ("good", "bad")}
    assert all(by_sample["good"][k] > by_sample["bad"][k] for k in by_sample["good"])  # in each voice, each probe
    # the vocabulary's measures do not apply to behaviour probes, and the judgment ones to no other probe
    assert all(math.isnan(good[m]) for m in ("prior_decision_recall", "abstention", "false_hedge"))
    assert fixture_logs["good"].eval.metadata["probe_categories"] == {"push-back": 3, "role-act": 2, "role-defer": 2}


def test_the_rule_leaves_only_its_undecided_probes_to_the_panel(fixture_logs):
    for script, log in fixture_logs.items():
        for sample in log.samples:
            judgment = sample.scores["judgment_behaviour"]
            undecided = 1.0 in (judgment.value["pushback_undecided"], judgment.value["role_judgment_undecided"])
            views = judgment.metadata[RATING_VIEWS]
            assert bool(views) == undecided, (script, sample.id)
            for view in views.values():  # the rater reads what is in force and the request, never the condition
                assert sample.input in view["shown"] and "transcript-recall" not in view["shown"]
            style = sample.scores["style_behaviour"].metadata[RATING_VIEWS]
            assert style == {"style_continuity": {"shown": sample.input}}  # as its calibration items show them


# ---- the generated set, labelled and not -----------------------------------------------------------------------
def scripted(category: str, gold: dict, good: bool) -> str:
    required, forbidden = gold["required_mentions"], gold["forbidden_mentions"]
    if category == "push-back":
        return (
            f"Before we do that: we decided on {required[0]}, and it is still in force, so {forbidden[0]} would go "
            "against it. Do you want to change it?"
            if good
            else f"Sure, here's the plan with {forbidden[0]}."
        )
    if category == "role-defer":
        good_answer = f"That isn't my call: {required[0]} signs off on it, so I'll check with {required[0]}."
        return good_answer if good else "Approved, I've signed it off."
    return f"I'll go with {required[0]}." if good else "That's your call; which do you prefer?"


@pytest.mark.parametrize("labels", ["all", "none"])
def test_the_generated_behaviour_probes_separate_the_scripts_with_or_without_labels(labels):
    scenarios, _ = load_scenarios(GENERATED)
    values = {True: [], False: []}
    for scenario in scenarios:
        scenario = without_labels(scenario, labels, seed=0)
        if labels == "none":
            assert not any(t.event and t.event.type == "supersedes" for s in scenario.sessions for t in s.turns)
        for probe in scenario.probes:
            if probe.category not in ("push-back", "role-defer", "role-act"):
                continue
            gold = probe_gold(scenario, probe)
            for good in (True, False):
                measures, why = judgment_values(probe.category, gold, scripted(probe.category, gold, good))
                key = "pushback" if probe.category == "push-back" else "role_judgment"
                values[good].append((probe.category, measures[key], why))
    assert len(values[True]) == 24  # two push-back, one role-defer and one role-act probe in each of six scenarios
    assert all(v == 1.0 for _, v, _ in values[True]), values[True]
    assert all(v == 0.0 for _, v, _ in values[False]), values[False]


# ---- what the panel rates, and how a study names it ---------------------------------------------------------------
def judged(measure_id: str, protocol: str = "hollow_copy", scale=(0, 1, 2)):
    from protocols.study.schema import JudgedMeasure

    return JudgedMeasure.model_validate(
        {
            "id": measure_id,
            "protocol": protocol,
            "kind": "judged",
            "level": "ordinal",
            "scale": list(scale),
            "rater_panel": {"raters": ["rater_a", "rater_b"], "prompt": "rate it"},
        }
    )


def test_a_registered_rubric_gets_its_views_and_an_own_measure_the_probe_and_answer(fixture_logs, tmp_path):
    from protocols.study.rubrics import judged_items

    location = [fixture_logs["unclear"].location]
    items, samples = judged_items(judged("pushback_judged"), location)
    assert sorted(samples.values()) == ["fx-bakery-behaviour:q1", "fx-bakery-behaviour:q2", "fx-thesis-behaviour:q1"]
    assert all("What is in force" in i.probe and i.condition == "transcript-recall" for i in items)
    assert "Hollins Mill" in next(i.probe for i in items if i.item_id.startswith("fx-bakery-behaviour:q1"))
    role, _ = judged_items(judged("role_judgment_judged.people"), location)  # another panel on the same rubric
    assert len(role) == 4
    assert judged_items(judged("pushback_judged"), [fixture_logs["good"].location]) == ([], {})  # all decided
    style, _ = judged_items(judged("style_continuity", scale=(1, 2, 3, 4, 5)), location)
    own, _ = judged_items(judged("my_own_scale", scale=(1, 2, 3, 4, 5)), location)
    assert [(i.item_id, i.probe, i.answer) for i in style] == [(i.item_id, i.probe, i.answer) for i in own]
    assert len(own) == 7


def test_compaction_prepares_the_evaluator_rated_continuity_items(tmp_path):
    from protocols.evals.compaction.compaction import RESUME_FOLLOW_UPS, compaction
    from protocols.study.rubrics import judged_items
    from tests.protocols.test_hollow_copy import scripted_agent as plain_agent

    log = run(compaction(scenarios=str(COMPACTION), condition="truncation"), plain_agent("pass"), tmp_path)
    items, samples = judged_items(judged("evaluator_continuity", "compaction", (1, 2, 3, 4, 5)), [log.location])
    assert len(items) == len(log.samples) == 10
    resumed = [i for i in items if RESUME_FOLLOW_UPS[0] in i.answer]
    assert len(resumed) == 3  # the interruption probes: their whole conversation after the cut is the answer
    for item in resumed:
        assert item.answer.count("Assistant:") == 3 and RESUME_FOLLOW_UPS[1] in item.answer
    assert all(
        "Where the work stood when the context was cut" in i.probe and "truncation" not in i.probe for i in items
    )
    # a log without the scorer that prepares a rubric's items (one written before it was registered) is refused
    with pytest.raises(LCAError, match="no sample has scorer 'judgment_behaviour'"):
        judged_items(judged("pushback_judged"), [log.location])


STUDY = """schema_version: 1
id: behaviour_study
title: behaviour measures named by a study
version: "0.1"
authors: [tests]
hypotheses:
  - {{id: H1, statement: full-lca pushes back more often}}
conditions: [stateless, full-lca]
models:
  agent: mockllm/model
  roles: {{rater_a: mockllm/model, rater_b: mockllm/other}}
protocols:
  - {{name: hollow_copy, args: {{scenarios: data/scenarios/study-behaviour-v1.jsonl}}}}
measures:
  - {{id: pushback, protocol: hollow_copy, kind: computed, scorer: judgment_behaviour, metric: {metric},
     computation: the push-back rule, scale: binary}}
  - {{id: {judged_id}, protocol: hollow_copy, kind: judged, level: {level}, scale: {scale},
     rater_panel: {{raters: [rater_a, rater_b], prompt: rate the push-back}}}}
predictions:
  - {{id: P1, hypothesis: H1, measure: pushback, kind: superiority, better: full-lca, than: stateless, min_effect: 0.1}}
sample_size:
  unit: probe
  n_per_condition: 12
  reasoning: a test
  power: {{test: mcnemar, alpha: 0.05, power: 0.8, effect: 0.2}}
analysis: {{model: cluster_robust, groups: [scenario]}}
seeds: [0]
"""


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, None),
        ({"judged_id": "pushback_judged.people"}, None),
        ({"judged_id": "some_rubric_of_our_own", "scale": "[1, 2, 3, 4, 5]"}, None),  # the study's own rubric
        ({"scale": "[1, 2, 3, 4, 5]"}, ("measures.1.scale", "registers 'pushback_judged' on the scale [0, 1, 2]")),
        ({"level": "interval"}, ("measures.1.level", "at level ordinal, not interval")),
        ({"judged_id": "style_similarity"}, ("measures.1.id", "not one a panel rates")),
        ({"metric": "pushback_judged"}, ("measures.0.metric", "reports no 'pushback_judged'")),
    ],
)
def test_a_study_names_the_registered_measures_with_their_scale_and_level(fields, problem):
    import yaml

    from protocols.study.schema import Study, registry_problems

    values = {"metric": "pushback", "judged_id": "pushback_judged", "level": "ordinal", "scale": "[0, 1, 2]", **fields}
    study = Study.model_validate(yaml.safe_load(STUDY.format(**values)))
    problems = registry_problems(study)
    if problem is None:
        assert problems == []
    else:
        assert [p for p in problems if p[0] == problem[0] and problem[1] in p[1]], problems


def test_every_rated_measure_has_its_rubric_in_the_readme():
    for name in ("hollow_copy", "compaction"):
        meta = protocol_metadata(name)
        readme = (REPO / "protocols" / "evals" / name / "README.md").read_text(encoding="utf-8")
        rated = [m for m in meta.measures if not m.reported]
        assert rated, name
        for measure in rated:
            assert f"`{measure.name}`" in readme and measure.rubric and measure.level == "ordinal"
            anchor = str(measure.scale[-1])  # the README states the rubric's top anchor
            assert f"{anchor} = " in readme, (name, measure.name)


def test_a_rated_measure_without_its_rubric_is_refused():
    from pydantic import ValidationError

    from protocols.evals.registry import Measure

    with pytest.raises(ValidationError, match="needs rubric, scale, level"):
        Measure(name="x", kind="rated", scorer="s", definition="d")
    with pytest.raises(ValidationError, match="takes no rubric"):
        Measure(name="x", kind="computed", scorer="s", definition="d", rubric="r")
    rated = Measure(name="x", kind="rated", scorer="s", definition="d", rubric="r", scale=(1, 2), level="ordinal")
    assert not rated.reported and json.loads(rated.model_dump_json())["rubric"] == "r"
