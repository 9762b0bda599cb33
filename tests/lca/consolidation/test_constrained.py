"""Constrained decoding in consolidation: each writer and reviewer call asks for its JSON schema (citing only
the window's lines, naming only the memories shown), JSON answers become candidates and verdicts, and an
answer that is not readable JSON is a counted failure, never a crash. The real SmolLM2 (slow): a constrained
writer call on a tiny span is well-formed JSON with at least one candidate."""

from __future__ import annotations

import json

import pytest

from lca.consolidation import ConsolidationConfig, parse_review, parse_writer_output
from lca.consolidation.parsing import writer_said_nothing
from lca.consolidation.prompts import (
    NO_CONTRADICTION,
    WRITER_DEMO,
    WRITER_SYSTEM,
    WRITER_TASK,
    reviewer_schema,
    with_demos,
    writer_schema,
)
from lca.errors import LCAError
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, TranscriptSpan
from lca.recall import RecallConfig
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder, FakeScriptedGenerator
from tests.lca.test_consolidation import say


@pytest.fixture
def home(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.05)) as s:
        yield s


def json_writer(*memories, prevented=None):
    answer: dict = {"memories": [{"type": t, "claim": c, "lines": list(n)} for t, c, n in memories]}
    if prevented is not None:
        answer["prevented"] = prevented
    return FakeScriptedGenerator(lambda messages: json.dumps(answer), model_id="fake-writer")


def json_reviewer(supported=True, contradicts=NO_CONTRADICTION, verdict="accept"):
    answer = {"reasoning": "The cited line says it.", "supported": supported, "contradicts": contradicts}
    answer["verdict"] = verdict
    return FakeScriptedGenerator(lambda messages: json.dumps(answer), model_id="fake-reviewer")


def remember(substrate, id_="fact-billing-db", body="The billing service database is MySQL 8."):
    record = MemoryRecord(
        id=id_,
        type=MemoryType.FACT,
        created="2026-01-01T00:00:00",
        authority=Authority.REVIEWED,
        privacy=Privacy.PRIVATE,
        sources=(TranscriptSpan(session="s0", entries=("s0:1",)),),
    )
    substrate.memory.write(record, body)
    substrate.ingest()
    return id_


# -- the schemas reach the generators
def test_every_writer_and_reviewer_call_asks_for_its_schema(home):
    say(home, "s1", "Ana prefers green tea in the morning.", "Noted: green tea.", "My cat Pebble is four.")
    w = json_writer(("preference", "Ana prefers green tea in the morning.", (1,)))
    r = json_reviewer()
    home.checkpoint(w, reviewer=r)
    (writer_asked,) = w.schemas
    assert writer_asked == writer_schema([1, 2, 3])
    items = writer_asked["properties"]["memories"]["items"]["properties"]
    assert items["lines"]["items"] == {"enum": [1, 2, 3]}  # only the window's own line numbers can be cited
    assert "prevented" not in writer_asked["properties"]  # no memory was in use
    (reviewer_asked,) = r.schemas
    assert reviewer_asked == reviewer_schema([])
    assert reviewer_asked["properties"]["contradicts"] == {"enum": [NO_CONTRADICTION]}
    assert "supersede" not in reviewer_asked["properties"]["verdict"]["enum"]  # nothing shown to supersede
    assert list(reviewer_asked["properties"]) == ["reasoning", "supported", "contradicts", "verdict"]


def test_the_reviewer_may_name_only_the_memories_it_was_shown(home):
    shown = remember(home)
    say(home, "s1", "We moved the billing service database to PostgreSQL 16 now.")
    r = json_reviewer(supported=True, contradicts=shown, verdict="supersede")
    result = home.checkpoint(json_writer(("fact", "The billing service database is PostgreSQL 16.", (1,))), reviewer=r)
    (asked,) = r.schemas
    assert asked["properties"]["contradicts"]["enum"] == [NO_CONTRADICTION, shown]
    assert "supersede" in asked["properties"]["verdict"]["enum"]
    (verdict,) = result.verdicts
    assert verdict.verdict == "supersede" and verdict.contradicts == shown and verdict.reasoning_first


# -- JSON answers become candidates and verdicts
def test_json_answers_are_parsed_into_candidates_verdicts_and_memories(home):
    say(home, "s1", "Ana prefers green tea in the morning.", "Noted: green tea.", "My cat Pebble is four years old.")
    result = home.checkpoint(
        json_writer(
            ("preference", "Ana prefers green tea in the morning.", (1,)),
            ("fact", "Pebble, the user's cat, is four years old.", (3,)),
        ),
        reviewer=json_reviewer(),
    )
    assert [(c.type, c.claim, c.lines) for c in result.candidates] == [
        ("preference", "Ana prefers green tea in the morning.", (1,)),
        ("fact", "Pebble, the user's cat, is four years old.", (3,)),
    ]
    assert [v.verdict for v in result.verdicts] == ["accept", "accept"]
    assert all(v.reasoning == "The cited line says it." and v.reasoning_first for v in result.verdicts)
    assert result.failures == ()
    bodies = sorted(m.body.strip() for m in home.memory_files().values())
    assert bodies == ["Ana prefers green tea in the morning.", "Pebble, the user's cat, is four years old."]


def test_an_empty_json_list_is_the_writer_saying_nothing_not_a_failure(home):
    say(home, "s1", "The weather is awful this week.")
    result = home.checkpoint(json_writer(), reviewer=json_reviewer())
    assert result.candidates == () and result.failures == ()


# -- unreadable answers are counted failures
@pytest.mark.parametrize("answer", ['{"memories": [{"type": "fact", "claim": ', "{not json at all}", '{"facts": []}'])
def test_a_writer_answer_that_is_not_readable_json_is_a_counted_failure(home, answer):
    say(home, "s1", "Ana prefers green tea in the morning.")
    result = home.checkpoint(FakeScriptedGenerator(lambda m: answer), reviewer=json_reviewer())
    assert result.candidates == () and result.writes == ()
    (failure,) = result.failures
    assert (failure.stage, failure.kind, failure.raw) == ("extract", "malformed", answer)
    assert result.counts["failures"] == 1


@pytest.mark.parametrize(
    "answer",
    [
        '{"reasoning": "The line says',  # cut by the token budget
        '{"reasoning": "ok", "supported": "maybe", "contradicts": "none", "verdict": "accept"}',
        '{"reasoning": "ok", "supported": true, "contradicts": "none", "verdict": "approve"}',
        "[true]",
    ],
)
def test_a_reviewer_answer_that_is_not_readable_json_fails_closed(home, answer):
    say(home, "s1", "Ana prefers green tea in the morning.")
    w = json_writer(("preference", "Ana prefers green tea in the morning.", (1,)))
    result = home.checkpoint(w, reviewer=FakeScriptedGenerator(lambda m: answer))
    (verdict,) = result.verdicts
    assert verdict.verdict == "failed" and verdict.raw == answer
    (failure,) = result.failures
    assert (failure.stage, failure.kind) == ("verify", "malformed")
    assert home.memory_files() == {}


def test_a_writer_answer_cut_by_the_token_budget_keeps_its_complete_items():
    cut = (
        '{"memories": [{"type": "fact", "claim": "Lucia is a nurse.", "lines": [1]}, '
        '{"type": "rule", "claim": "Answer in French.", "lines": [3]}, {"type": "fact", "claim": "Pebb'
    )
    found, prevented, unparsed = parse_writer_output(cut)
    assert found == [("fact", "Lucia is a nurse.", [1]), ("rule", "Answer in French.", [3])]
    assert prevented == [] and unparsed == 1  # the cut tail
    assert not writer_said_nothing(cut)


def test_json_writer_items_that_break_the_schema_are_counted_not_kept():
    answer = json.dumps(
        {
            "memories": [
                {"type": "fact", "claim": "Ana likes tea.", "lines": [2]},
                {"type": "gossip", "claim": "Bob is late.", "lines": [1]},
                {"type": "fact", "claim": "  ", "lines": [1]},
                {"type": "fact", "claim": "Cited oddly.", "lines": ["one"]},
            ],
            "prevented": [{"memory": "rule-staging", "line": 4, "what": "deployed to staging first"}, {"line": 2}],
        }
    )
    found, prevented, unparsed = parse_writer_output(answer)
    assert found == [("fact", "Ana likes tea.", [2])]
    assert prevented == [("rule-staging", "deployed to staging first", 4, "deployed to staging first")]
    assert unparsed == 4


def test_json_review_parsing_reads_fields_and_their_order():
    first = parse_review(
        '{"reasoning": "Porto, not Lisbon.", "supported": false, "contradicts": "none", "verdict": "reject"}'
    )
    assert first == {
        "verdict": "reject",
        "supported": False,
        "contradicts": None,
        "reasoning": "Porto, not Lisbon.",
        "reasoning_first": True,
    }
    late = parse_review(
        '```json\n{"verdict": "Supersede", "supported": "yes", "contradicts": "m-1", "reasoning": "x"}\n```'
    )
    assert late is not None and late["verdict"] == "supersede" and late["supported"] is True
    assert late["contradicts"] == "m-1" and late["reasoning_first"] is False
    assert parse_review('{"reasoning": "no verdict", "supported": true}') is None


def test_the_line_format_is_still_read():
    found, _, _ = parse_writer_output("fact | Ana likes tea | 2")
    assert found == [("fact", "Ana likes tea", [2])]
    assert parse_review("REASONING: ok\nSUPPORTED: yes\nCONTRADICTS: none\nVERDICT: accept")["verdict"] == "accept"
    assert writer_said_nothing("NONE") and writer_said_nothing('{"memories": []}')
    assert not writer_said_nothing("") and not writer_said_nothing('{"memories": [], "prevented": [{"x": 1}]}')


def test_memories_in_use_are_the_only_ones_a_prevented_claim_can_name():
    schema = writer_schema([4, 5], ["rule-staging", "fact-db"])
    prevented = schema["properties"]["prevented"]["items"]["properties"]
    assert prevented["memory"] == {"enum": ["fact-db", "rule-staging"]} and prevented["line"] == {"enum": [4, 5]}
    assert schema["required"] == ["memories"]


# -- the generator's side of the keyword
def test_the_local_generator_refuses_a_schema_it_cannot_turn_into_a_grammar_before_loading():
    from lca.generators import LlamaCppGenerator

    generator = LlamaCppGenerator()
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(LCAError, match="json_schema must be a mapping"):
        generator.generate(messages, json_schema=["not", "a", "schema"])  # type: ignore[arg-type]
    with pytest.raises(LCAError, match="not JSON-serializable"):
        generator.generate(messages, json_schema={"enum": [object()]})
    assert not generator.loaded
    schema = writer_schema([1, 2])
    assert generator._grammar(schema) is generator._grammar(dict(schema))  # built once per schema


def test_the_local_generator_keeps_only_the_recent_grammars(monkeypatch):
    import lca.generators
    from lca.generators import LlamaCppGenerator

    monkeypatch.setattr(lca.generators, "GRAMMAR_CACHE_SIZE", 2)
    generator = LlamaCppGenerator()
    first = generator._grammar(writer_schema([1]))
    generator._grammar(writer_schema([2]))
    generator._grammar(writer_schema([3]))
    assert len(generator._grammars) == 2
    assert generator._grammar(writer_schema([1])) is not first  # evicted, built again


# -- the real model
@pytest.mark.slow
def test_smollm2_constrained_writer_call_is_json_with_a_candidate():
    from lca.generators import LlamaCppGenerator

    numbered = (
        "[1] user: My sister Lucia just moved to Lisbon. She works as a nurse at Santa Maria hospital.\n"
        "[2] assistant: That is a big move for Lucia."
    )
    messages = with_demos(WRITER_SYSTEM, (WRITER_DEMO,), f"Conversation lines:\n{numbered}\n\n{WRITER_TASK}")
    config = ConsolidationConfig()
    with LlamaCppGenerator() as generator:
        text = generator.generate(
            messages, max_tokens=config.writer_max_tokens, seed=0, json_schema=writer_schema([1, 2])
        )
    answer = json.loads(text)  # well-formed: the grammar allows nothing else, and this answer fits the budget
    found, _, unparsed = parse_writer_output(text)
    assert found and unparsed == 0, answer
    assert all(set(lines) <= {1, 2} for _, _, lines in found)


def test_a_candidate_copied_from_the_worked_example_is_dropped_and_counted(home):
    say(home, "s1", "The garden needs watering.", "Evening watering is best.")
    w = json_writer(
        ("fact", "The garden needs watering.", (1,)),
        ("fact", "Mia, the user's daughter, starts school in September.", (1,)),
        ("rule", "Always answer the user in French.", (2,)),
    )
    result = home.checkpoint(w, reviewer=json_reviewer())
    assert [c.claim for c in result.candidates] == ["The garden needs watering."]
    echoes = [f for f in result.failures if f.kind == "echoed_example"]
    assert [(f.stage, f.raw) for f in echoes] == [
        ("extract", "Mia, the user's daughter, starts school in September."),
        ("extract", "Always answer the user in French."),
    ]


def test_a_claim_the_conversation_itself_makes_is_no_echo_even_if_the_example_says_it(home):
    say(home, "s1", "From now on, always answer me in French.", "D'accord.")
    result = home.checkpoint(json_writer(("rule", "Always answer the user in French.", (1,))), reviewer=json_reviewer())
    assert [c.claim for c in result.candidates] == ["Always answer the user in French."]
    assert not [f for f in result.failures if f.kind == "echoed_example"]


def test_a_raw_newline_inside_a_json_string_is_read():
    review = parse_review(
        '{"reasoning": "The line says it,\n ", "supported": true, "contradicts": "none", "verdict": "accept"}'
    )
    assert review is not None and review["reasoning"] == "The line says it," and review["supported"] is True
    found, _, unparsed = parse_writer_output(
        '{"memories": [{"type": "fact", "claim": "Ana\tlikes tea.", "lines": [1]}]}'
    )
    assert found == [("fact", "Ana likes tea.", [1])] and unparsed == 0
