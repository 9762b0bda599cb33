from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lca.errors import EmbedderMismatchError, RecordFormatError
from lca.memory import Authority, MemoryRecord, MemoryType, Privacy, Supersession
from lca.recall import (
    TERMS,
    RecallConfig,
    RecallContext,
    ResonanceWeights,
    contains_secret,
    experience_term,
    resonance_score,
    temporal_term,
)
from lca.substrate import Substrate
from lca.types import EntryKind
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

LOW_FLOOR = RecallConfig(floor=0.05)


def candidates_by_turn(result) -> dict:
    """A recall's candidates by the entry id of their turn ("s:2")."""
    return {c.source.split("#")[1].split("[")[0]: c for c in result.candidates}


def memory(id_: str, **kw) -> MemoryRecord:
    return MemoryRecord(
        id=id_,
        type=kw.pop("type", MemoryType.FACT),
        created=kw.pop("created", datetime(2026, 1, 1)),
        authority=kw.pop("authority", Authority.APPROVED),
        privacy=kw.pop("privacy", Privacy.PUBLIC),
        **kw,
    )


@pytest.fixture
def store(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=LOW_FLOOR) as s:
        yield s


def test_weights_and_settings_are_validated_by_name(tmp_path):
    with pytest.raises(RecordFormatError) as info:
        ResonanceWeights.from_mapping({"similarity": 1.0, "gravity": 0.3})
    assert info.value.field == "gravity" and "known:" in str(info.value)
    for bad in (float("nan"), -0.1, float("inf"), "high"):
        with pytest.raises(RecordFormatError) as info:
            ResonanceWeights(temporal=bad)
        assert info.value.field == "temporal"
    with pytest.raises(RecordFormatError) as info:
        RecallConfig(token_budget=-5)
    assert info.value.field == "token_budget"
    path = tmp_path / "weights.yaml"
    path.write_text("pool: 20\nweights:\n  similarity: 1\n  risk: .nan\n")
    with pytest.raises(RecordFormatError) as info:
        RecallConfig.from_file(path)
    assert info.value.field == "risk" and str(path) in str(info.value)
    path.write_text("pool: 20\nmmr: 0.5\n")
    with pytest.raises(RecordFormatError, match="unknown setting"):
        RecallConfig.from_file(path)
    path.write_text("pool: 20\nfloor: 0.4\nweights:\n  experience: 0\n")
    loaded = RecallConfig.from_file(path)
    assert loaded.pool == 20 and loaded.floor == 0.4 and loaded.weights.experience == 0.0
    assert loaded.retrieval is None  # the store's own ranking settings
    path.write_text("retrieval:\n  bm25_weight: 0\n  fusion: rrf\n")
    loaded = RecallConfig.from_file(path)
    assert (loaded.retrieval.bm25_weight, loaded.retrieval.fusion) == (0.0, "rrf")
    for text, field in (("retrieval:\n  bm25: 1\n", "retrieval.bm25"), ("retrieval: [1]\n", "retrieval")):
        path.write_text(text)
        with pytest.raises(RecordFormatError) as info:
            RecallConfig.from_file(path)
        assert info.value.field == field and str(path) in str(info.value)


def test_recall_ranks_by_its_configs_retrieval_settings_when_given(store):
    """S comes from the one ranking path; a RecallConfig's ``retrieval`` replaces the store's settings for it."""
    from lca.retrieval import RetrievalConfig

    texts = [
        "the quarterly budget review is on Friday",
        "budget budget budget spreadsheet totals",
        "we moved the review of costs to next week",
        "lunch was a sandwich by the river",
    ]
    store.append([make_entry("s", n, text) for n, text in enumerate(texts, 1)])
    store.ingest()
    query = "budget review"
    rankings = []
    for retrieval in (RetrievalConfig(bm25_weight=0.0), RetrievalConfig(dense_weight=0.0, bm25_weight=1.0)):
        hits = store.search(query, k=10, pool=50, config=retrieval)
        result = store.recall(query, config=replace(LOW_FLOOR, retrieval=retrieval, mmr_lambda=1.0))
        s_of = {c.source: c.terms["similarity"] for c in result.candidates}
        ordered = sorted(s_of, key=s_of.get, reverse=True)
        assert [c.source.split("#", 1)[1] for c in result.candidates] and len(ordered) == len(hits)
        assert [h.pointer.entry_id for h in hits] == [src.split("#", 1)[1].split("[", 1)[0] for src in ordered]
        rankings.append(ordered)
    assert rankings[0] != rankings[1]  # the two settings rank differently, so the check above could fail


@settings(max_examples=300, deadline=None)
@given(
    s_rel=st.floats(0, 1),
    s_irr=st.floats(0, 1),
    learned=st.lists(st.floats(0, 1), min_size=5, max_size=5),
    w=st.lists(st.floats(0, 2), min_size=5, max_size=5),
    alpha=st.floats(0.1, 3),
)
def test_relevance_dominates_learned_signals_only_tilt(s_rel, s_irr, learned, w, alpha):
    weights = ResonanceWeights(
        similarity=alpha, experience=w[0], temporal=w[1], authority=w[2], task=w[3], activation=w[4]
    )
    tilting = ("experience", "temporal", "authority", "task", "activation")
    relevant = {"similarity": s_rel, "risk": 0, **{t: 0.0 for t in tilting}}
    favoured = dict(zip(tilting, learned), similarity=s_irr, risk=0)
    if alpha * (s_rel - s_irr) > weights.tilt_bound + 1e-12:
        assert resonance_score(relevant, weights) > resonance_score(favoured, weights)


def test_term_functions_are_bounded_and_behave():
    assert experience_term({}) == pytest.approx(0.5)
    assert experience_term({"used": 10_000, "approved": 10_000}) <= 1.0
    assert experience_term({"contradicted": 5}) < 0.5 < experience_term({"used": 5})
    assert experience_term({"used": 50}, normalization="log") <= 1.0
    with pytest.raises(RecordFormatError):
        experience_term({}, normalization="magic")
    plain = temporal_term(60, 0.5, half_life_days=30)
    assert plain == pytest.approx(0.25)
    assert temporal_term(60, 0.95, half_life_days=30) > plain  # experience stretches the half-life
    assert temporal_term(None, 0.5, half_life_days=30) == 0.0
    assert contains_secret("deploy with key AKIAABCDEFGHIJKLMNOP please")
    assert contains_secret("password: hunter22")
    assert not contains_secret("the password policy changed last week")


def test_empty_store_returns_an_empty_well_formed_block(store):
    result = store.recall("anything at all")
    assert result.items == () and result.candidates == ()
    assert result.block.startswith("<recalled-context") and result.block.rstrip().endswith("</recalled-context>")


def test_every_item_carries_its_source_and_the_block_names_it(store):
    store.memory.write(memory("deploy-rule", tags=("ops",)), "Always deploy through staging first.")
    store.append([make_entry("s", 1, "we deployed through staging on Monday")])
    result = store.recall(RecallContext("how do we deploy through staging"))
    assert {i.source_type for i in result.items} == {"memory", "transcript"}
    for n, item in enumerate(result.items, 1):
        turn = item.source.split("[", 1)[0]  # the block names the turn or memory; the span stays in the pointer
        assert item.source.startswith(turn + "[") and item.injected and item.tokens > 0
        named = "transcript:s:1" if item.source_type == "transcript" else turn  # the entry id s:1 names session s
        assert f"[{n}] {named} (" in result.block and "weight" in result.block
    assert "memory:approved" in result.block  # the authority row, where the source does not already say it
    assert "2026-01-01 00:00" in result.block and "+00:00" not in result.block  # when, to the minute as recorded
    assert result.tokens == sum(i.tokens for i in result.items) <= result.budget


def test_an_item_header_costs_few_tokens_and_says_what_a_reader_needs():
    from lca.recall.records import ScoredCandidate
    from lca.recall.shown import item_label, short_time

    item = ScoredCandidate(
        "c1",
        "transcript:spring-appeal.s7#spring-appeal.s7:3[0:248]",
        "transcript",
        "transcript",
        "text",
        "2026-04-02T18:40:00+01:00",
        0.4,
        {},
        0.75712,
    )
    assert item_label(9, item) == "[9] transcript:spring-appeal.s7:3 (2026-04-02 18:40, weight 0.76)"
    other = replace(item, source="transcript:s7#turn-12[0:9]")  # an entry id that does not name its session
    assert item_label(1, other) == "[1] transcript:s7#turn-12 (2026-04-02 18:40, weight 0.76)"
    wild = replace(item, source="memory:m1[0:9]", source_type="memory", authority_key="memory:approved", wildcard=True)
    assert item_label(2, wild).startswith(
        "[2] memory:m1 (wildcard: dormant record offered for exploration, memory:approved"
    )
    # a prompt brought by exchanges sits right before the turn that brought it, whose header gives the time
    prompt = replace(item, source="transcript:spring-appeal.s7#spring-appeal.s7:2[0:40]", prompt_of="c2")
    assert item_label(8, prompt) == "[8] transcript:spring-appeal.s7:2"
    assert (
        item_label(8, replace(prompt, authority_key="transcript:pinned"))
        == "[8] transcript:spring-appeal.s7:2 (transcript:pinned)"
    )
    assert short_time("2026-04-02") == "2026-04-02" and short_time("yesterday") == "yesterday"


def test_floor_filters_and_explains(tmp_path):
    # store_topic off: on a two-turn store a question on one turn is on the store's topic, whole history and all
    config = RecallConfig(floor=0.6, store_topic=False)
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=config) as s:
        s.append(
            [
                make_entry("s", 1, "rotate the deploy key every friday"),
                make_entry("s", 2, "lunch was pasta and salad today"),
            ]
        )
        result = s.recall("rotate the deploy key every friday")
        assert [i.source for i in result.items] == [result.candidates[0].source]
        omitted = {c.text: c.why_not for c in result.omitted}
        assert "below the similarity floor" in omitted["lunch was pasta and salad today"]


def test_secrets_and_private_facts_are_never_injected_where_they_must_not_be(store):
    store.append([make_entry("s", 1, "the staging token: sk-abcdefghijklmnopqrstuvwx123 works")])
    store.memory.write(memory("salary", privacy=Privacy.PRIVATE), "staging salary details for the team")
    store.ingest()
    public = store.recall(RecallContext("staging token salary details", public_channel=True))
    assert public.items == ()
    reasons = {c.source: c.why_not for c in public.omitted}
    assert any("private" in r for r in reasons.values())
    # a credential is not a policy filter any more: it is redacted wherever recall shows the text (issue 16)
    (turn,) = [c for c in public.candidates if c.source_type == "transcript"]
    assert "secret or credential" in turn.risk_reasons
    # a turn said nowhere known to be public stays out of a public channel (the credential alone would not)
    assert "private in a public channel" in turn.risk_reasons and turn.why_not.startswith("policy filter")
    assert turn.text == "the staging token: [REDACTED:openai-key] works"
    private = store.recall(RecallContext("staging token salary details", public_channel=False))
    assert private.items[0].source == "memory:salary[0:35]"
    # on this two-item store the question is on the store's topic, so the turn comes too: redacted
    assert all(i.text == "the staging token: [REDACTED:openai-key] works" for i in private.items[1:])


def test_where_a_turn_was_said_decides_public_channels_and_task_relevance(store):
    """A transcript turn's meta says where it was said: only a public turn reaches a public channel, and its
    project and role count toward Q like a memory's tags."""
    said = {
        1: ({"visibility": "private", "project": "atlas"}, "the atlas launch date is the ninth of May"),
        2: ({"visibility": "public", "project": "atlas"}, "the atlas launch will be announced in May"),
        3: ({"visibility": "team", "project": "boreal"}, "the boreal launch date moved to June"),
    }
    store.append([make_entry("s", n, text, meta=meta) for n, (meta, text) in said.items()])
    store.ingest()
    query = "when is the launch date"
    public = store.recall(RecallContext(query, public_channel=True, channel="public"))
    assert [i.source.split("#")[1].split("[")[0] for i in public.items] == ["s:2"]
    assert {
        c.source.split("#")[1].split("[")[0] for c in public.omitted if "private in a public" in (c.why_not or "")
    } == {
        "s:1",
        "s:3",
    }
    team = store.recall(RecallContext(query, channel="team", project="atlas"))
    q = {c.source.split("#")[1].split("[")[0]: c.terms["task"] for c in team.candidates}
    assert q == {"s:1": 0.5, "s:2": 0.5, "s:3": 0.5}  # atlas turns carry the project, the boreal one the channel
    unscoped = store.recall(RecallContext(query))
    assert all(c.terms["task"] == 0.0 for c in unscoped.candidates) and len(unscoped.items) == 3


def test_a_failed_query_embedding_falls_back_to_lexical_recall(store, monkeypatch):
    from lca.errors import EmbeddingFailedError

    store.append(
        [make_entry("s", 1, "the quarterly budget review is on Friday"), make_entry("s", 2, "lunch by the river")]
    )
    store.ingest()

    def fail(query):
        raise EmbeddingFailedError("the query could not be embedded: test")

    monkeypatch.setattr(store.index, "query_vector", fail)
    result = store.recall("budget review")
    assert result.fallback.startswith("lexical:") and "could not be embedded" in result.fallback
    assert [i.source.split("#")[1].split("[")[0] for i in result.items] == ["s:1"]  # BM25 matches only it


def test_superseded_memory_is_a_candidate_only_for_history_questions(store):
    store.memory.write(
        memory("old-rule", superseded_by=Supersession(id="new-rule", reason="new process")), "deploys need one approval"
    )
    store.memory.write(memory("new-rule"), "deploys need two approvals")
    store.ingest()
    now = store.recall(RecallContext("how many approvals do deploys need"))
    assert [i.source.split("[")[0] for i in now.items] == ["memory:new-rule"]
    history = store.recall(RecallContext("how many approvals did deploys need before", about_history=True))
    assert {i.source.split("[")[0] for i in history.items} == {"memory:new-rule", "memory:old-rule"}


def test_expired_memory_is_filtered_at_the_as_of_time(store):
    store.memory.write(memory("promo", valid_to=datetime(2026, 3, 1)), "the discount code is SPRING")
    store.ingest()
    before = store.recall(RecallContext("discount code", as_of=datetime(2026, 2, 1)))
    after = store.recall(RecallContext("discount code", as_of=datetime(2026, 4, 1)))
    assert len(before.items) == 1 and after.items == ()
    assert "expired" in after.omitted[0].why_not


def test_quotas_budget_and_character_cap(tmp_path):
    # exchanges off: here a turn's prompt would ride along outside the quota (test_recall_shown)
    config = RecallConfig(
        floor=0.0, memory_quota=2, transcript_quota=1, token_budget=60, item_char_cap=60, exchanges=False
    )
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(max_input_tokens=400), recall_config=config) as s:
        for n in range(5):
            s.memory.write(memory(f"m{n}"), f"note {n} about the release train schedule " + "detail " * (3 * n))
        s.append([make_entry("s", n, f"release train chat {n}") for n in range(1, 5)])
        s.ingest()
        roomy = s.recall("release train schedule", config=replace(config, token_budget=1000, fit_budget=False))
        kinds = [i.source_type for i in roomy.items]
        assert kinds.count("memory") == 2 and kinds.count("transcript") == 1
        assert "quota" in " ".join(c.why_not or "" for c in roomy.omitted)
        # everything relevant fits 1000 tokens: with fit_budget (the default) the quotas cut none of it
        whole = s.recall("release train schedule", config=replace(config, token_budget=1000))
        assert [i.source_type for i in whole.items].count("memory") == 5 and len(whole.items) == 9
        # a zero quota switches a source off, and fitting the budget does not switch it back on
        off = s.recall("release train schedule", config=replace(config, token_budget=1000, memory_quota=0))
        assert {i.source_type for i in off.items} == {"transcript"}
        result = s.recall("release train schedule")
        assert 0 < result.tokens <= 60
        assert all(len(i.text) <= 60 for i in result.items)
        assert all(i.text.endswith(" [...]") == i.trimmed for i in result.items)
        assert "token budget" in " ".join(c.why_not or "" for c in result.omitted)


def test_trim_marks_and_cuts_at_a_word():
    from lca.recall.shown import trim

    text, trimmed = trim("alpha beta gamma delta epsilon zeta eta theta", 30)
    assert trimmed and text.endswith(" [...]") and len(text) <= 30 and "gam" in text
    assert trim("short", 30) == ("short", False)


def test_policies_none_and_adaptive(store):
    store.append([make_entry("s", 1, "the migration runbook lives in the ops wiki")])
    assert store.recall(RecallContext("migration runbook"), config=RecallConfig(policy="none", floor=0.05)).items == ()
    adaptive = RecallConfig(policy="adaptive", floor=0.99)
    skipped = store.recall(RecallContext("something unrelated entirely"), config=adaptive)
    assert skipped.action == "skip" and skipped.items == ()
    shrink = store.recall(
        RecallContext("migration runbook", continues_previous_task=True, previous_injection_used=False),
        config=RecallConfig(policy="adaptive", floor=0.05),
    )
    assert shrink.action == "shrink" and shrink.budget == RecallConfig().token_budget // 2
    deferred = store.recall(
        RecallContext("migration runbook", continues_previous_task=True, previous_injection_used=True),
        config=RecallConfig(policy="adaptive", floor=0.05),
    )
    assert deferred.action == "defer" and deferred.items == () and deferred.candidates
    assert all("defer" in c.why_not for c in deferred.candidates)


def test_users_can_change_the_authority_table(store):
    store.memory.write(memory("rule", authority=Authority.UNREVIEWED), "rotate keys monthly")
    store.ingest()
    default = store.recall("rotate keys monthly").candidates[0].terms["authority"]
    custom = (
        store.recall("rotate keys monthly", config=RecallConfig(floor=0.05, authority_table={"memory:unreviewed": 0.1}))
        .candidates[0]
        .terms["authority"]
    )
    assert default == 0.6 and custom == 0.1
    with pytest.raises(RecordFormatError) as info:
        RecallConfig(authority_table={"memory:rumour": 0.5})
    assert info.value.field == "authority_table.memory:rumour"


def test_experience_tilts_but_ablation_switches_it_off(store):
    store.memory.write(memory("a"), "backup schedule nightly")
    store.memory.write(memory("b"), "backup schedule weekly")
    store.ingest()
    base = store.recall("backup schedule")
    loser = base.items[-1].source.split("[")[0]
    for _ in range(20):
        store.experience.record(loser, "approved")
    tilted = store.recall("backup schedule")
    winner = next(c for c in tilted.candidates if c.source.startswith(loser))
    assert winner.terms["experience"] > 0.9
    ablated = store.recall("backup schedule", config=RecallConfig(floor=0.05, weights=ResonanceWeights(experience=0)))
    assert [c.source for c in ablated.candidates] == [c.source for c in base.candidates]
    with pytest.raises(RecordFormatError, match="must cite"):
        store.experience.record(loser, "prevented_mistake")


def test_every_recall_is_logged_per_candidate(store):
    store.append([make_entry("s", n, f"incident {n} postmortem notes") for n in range(1, 4)])
    result = store.recall("incident postmortem")
    lines = (store.home / "logs" / "recall.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    assert len(record["candidates"]) == len(result.candidates)
    assert set(record["candidates"][0]["terms"]) == set(TERMS)
    assert sum(c["injected"] for c in record["candidates"]) == len(result.items)
    assert all(c["injected"] or c["why_not"] for c in record["candidates"])


def test_recall_refuses_a_store_embedded_by_another_model(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", 1, "hello")])
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(name="other")) as s:
        with pytest.raises(EmbedderMismatchError, match="reindex"):
            s.recall("hello")


def test_scores_are_finite_and_terms_in_range(store):
    store.append([make_entry("s", n, f"topic {n} words here") for n in range(1, 8)])
    for c in store.recall("topic words").candidates:
        assert math.isfinite(c.score)
        assert all(0.0 <= v <= 1.0 for v in c.terms.values())


def test_living_memory_variant_labels_wildcards_and_records_accesses(tmp_path):
    config = RecallConfig(
        floor=0.0, memory_quota=5, transcript_quota=0, wildcard_mode="explore", weights=ResonanceWeights(activation=0.1)
    )
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=config) as s:
        for n in range(8):
            s.memory.write(memory(f"m{n}"), f"garden watering schedule variant {n}")
        s.ingest()
        first = s.recall("garden watering schedule")
        wild = [i for i in first.items if i.wildcard]
        assert len(wild) == 2  # round(0.4 * 5 slots)
        assert "wildcard: dormant record offered for exploration" in first.block
        assert all(0.0 <= c.terms["activation"] <= 1.0 for c in first.candidates)
        history = s.retrievals.by_target()
        assert sorted(history) == sorted(i.source for i in first.items)
        assert {i.source for i in wild} == {k for k, v in history.items() if v[0].wildcard}
        second = s.recall("garden watering schedule")
        injected_before = {i.source for i in first.items if not i.wildcard}
        for c in second.candidates:
            if c.source in injected_before:
                assert c.terms["activation"] > 0.0  # accessed records gain activation
    precision = RecallConfig(floor=0.0, wildcard_mode="precision")
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=precision) as s:
        assert not any(i.wildcard for i in s.recall("garden watering schedule").items)
    with pytest.raises(RecordFormatError) as info:
        RecallConfig(wildcard_mode="chaos")
    assert info.value.field == "wildcard_mode"


@pytest.mark.parametrize(
    "text",
    [
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a" * 36,
        "sk-" + "b" * 24,
        "xoxb-1234567890-abc",
        "-----BEGIN RSA PRIVATE KEY-----",
        "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
        "API_KEY = abcdef123456",
        "Password: correct-horse",
    ],
)
def test_each_secret_shape_is_caught_through_the_prefilter(text):
    assert contains_secret(f"before {text} after")


def test_task_relevance_uses_the_transcript_channel(store):
    store.append(
        [
            make_entry("s", 1, "the nightly backup job failed again", channel="ops"),
            make_entry("t", 1, "the nightly backup job failed again!", channel="random"),
        ]
    )
    result = store.recall(RecallContext("nightly backup job failed", channel="ops"))
    by_channel = {c.source.split("#")[0]: c.terms["task"] for c in result.candidates}
    assert by_channel == {"transcript:s": 1.0, "transcript:t": 0.0}


# ---- the store floor: relative to the store's own scores (lca.recall.floor) ----------------------------
SMALL_STORE = [
    "sister lucia works night shifts nurse santa maria hospital lisbon",
    "vegetable omelette takes ten minutes",
    "pebble cat sees vet february twenty",
    "rainy weeks tiring stay dry",
    "garage booked truck four thirteenth",
]


@pytest.fixture
def small(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(SMALL_STORE, 1)])
        yield s


def test_a_relevant_turn_in_a_small_store_clears_the_store_floor(small):
    query = "which hospital does lucia work night shifts at"
    # the floor alone: this question is on the store's topic too, which would let the whole history past
    no_topic = RecallConfig(store_topic=False)
    absolute = small.recall(query, config=replace(no_topic, floor_mode="absolute"))
    assert absolute.items == () and absolute.floor == 0.5  # the one absolute cosine starves this store
    result = small.recall(query, config=no_topic)
    assert 0.2 <= result.floor < 0.5 and "off-topic ceiling" in result.floor_detail
    assert [i.source.split("[")[0] for i in result.items] == ["transcript:s#s:1"]
    assert result.floor <= result.items[0].cosine < 0.5
    # --explain's why-not names the value the floor was applied to and what it was made of
    why = next(c.why_not for c in result.omitted if c.source.startswith("transcript:s#s:2"))
    assert "below the similarity floor (cosine" in why and "store: off-topic ceiling" in why


def test_a_small_store_is_ranked_without_the_feedback_round_unless_asked(small, monkeypatch):
    """Pseudo-relevance feedback moves the query towards the top turns; in a store ranked whole those are the
    store's subject, so a small store is ranked without it (``small_store_feedback``). A large one keeps it."""
    asked = []
    search = small.index.search
    monkeypatch.setattr(small.index, "search", lambda *a, **kw: asked.append(kw["config"]) or search(*a, **kw))
    query = "which hospital does lucia work night shifts at"
    stored = small.index.retrieval
    assert stored.feedback_weight > 0  # the store's own ranking has the round
    small.recall(query)
    assert asked[-1].feedback_weight == 0 and asked[-1].lexical_feedback_weight == 0
    assert replace(asked[-1], feedback_weight=stored.feedback_weight) == stored  # nothing else changed
    small.recall(query, config=RecallConfig(small_store_feedback=True))
    assert asked[-1] == stored
    small.recall(query, config=RecallConfig(small_store=2))  # five chunks: no longer small
    assert asked[-1] == stored
    # and the ranking recall re-weighs is the store's search under that config
    hits = search(query, k=5, pool=5, config=replace(stored, feedback_weight=0.0))
    result = small.recall(query)
    similarity = {c.chunk_id: c.terms["similarity"] for c in result.candidates}
    in_hit_order = [similarity[h.chunk_id] for h in hits]
    assert len(hits) == 5 and in_hit_order == sorted(in_hit_order, reverse=True)


def test_an_off_topic_question_on_the_same_store_injects_nothing(small):
    for query in ("Which planet has the longest day?", "What is the tallest mountain in Africa?"):
        result = small.recall(query)
        assert result.items == () and not result.whole_history
        assert all("below the similarity floor" in c.why_not for c in result.candidates)


def test_a_large_store_keeps_the_absolute_floor(tmp_path):
    encyclopedic = [
        "tungsten melting point degrees celsius is very high",
        "neptune moons count and orbits",
        "capital of burkina faso ouagadougou",
        "goldberg variations composed by bach",
        "krebs cycle produce energy",
    ]
    texts = [f"{encyclopedic[n % 5]} note {n}" for n in range(15)] + SMALL_STORE
    config = RecallConfig(pool=10, small_store=0)  # larger than the pool, and not ranked whole
    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=config) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(texts, 1)])
        result = s.recall("which hospital does lucia work night shifts at")
        assert result.floor == 0.5 and result.items == ()  # off-topic questions reach high here: no lowering
        # larger than the pool: a question in the first person does not open the whole history either
        mine = s.recall("what did my sister say about garage booked")
        assert not mine.whole_history and all(i.cosine >= 0.5 for i in mine.items)


def test_a_question_about_the_users_own_history_gets_a_small_store_whole(small):
    query = "what did I tell you about my week"
    result = small.recall(query)
    assert result.whole_history and len(result.items) == len(SMALL_STORE)
    assert small.recall(query, config=RecallConfig(fit_budget=False)).items == ()
    tight = small.recall(query, config=RecallConfig(token_budget=60))
    assert 0 < len(tight.items) < len(SMALL_STORE) and tight.tokens <= 60  # the budget still decides


def test_a_question_on_a_small_stores_topic_gets_its_history_past_the_floor(small):
    """Not in the first person, in no project, and no single turn clears the floor: but the question is about
    what this history is about as a whole (closer to the store's centroid than any off-topic question)."""
    from lca.recall.floor import topic_reading

    query = "lucia omelette pebble weeks truck"  # a word of every turn, the best match of none
    plain = small.recall(query, config=RecallConfig(store_topic=False))
    assert not plain.whole_history and len(plain.items) < len(SMALL_STORE)  # the floor held some back
    result = small.recall(query)
    assert result.whole_history and len(result.items) == len(SMALL_STORE)
    assert result.whole_history_why.startswith("on the store's topic (cosine to the store's centroid")
    reading = topic_reading(small.index, small.index.query_vector(query), 0.02)
    assert reading is not None and reading.on_topic and reading.cosine > reading.ceiling + 0.02
    # the margin is the setting that decides: above the question's cosine, the floor holds again
    strict = small.recall(query, config=RecallConfig(topic_margin=reading.cosine - reading.ceiling + 0.01))
    assert not strict.whole_history and len(strict.items) == len(plain.items)
    for off_topic in ("Which planet has the longest day?", "Who composed the Goldberg Variations?"):
        assert not topic_reading(small.index, small.index.query_vector(off_topic), 0.02).on_topic


MANY_SUBJECTS = [
    "quarterly estimated tax payment due june gloria",
    "estimated tax penalty underpayment freelancing income",
    "tax payment portal receipt saved",
    "knee sprain physio wall sits swelling",
    "maya birthday party nature center tarantula",
    "payroll spreadsheet merge columns zfill",
    "sourdough starter sluggish feeding flour",
    "porch ceiling fan damp rated junction box",
    "marathon long run twenty miles sunday",
    "mortgage refinance closing costs lender quote",
    "ukulele chords strumming pattern practice",
    "sublet room august deposit landlord",
    "fiddle leaf fig repotted roots mushy",
    "interview prep behavioral questions star method",
    "grout mildew bleach scrub sealer",
    "genealogy census records great grandfather",
] + [f"garden shed chores list week {n} done" for n in range(20)]


def test_a_question_on_one_subject_of_a_history_of_many_gets_that_history_past_the_floor(tmp_path):
    """One person's history of many subjects: its centroid is about none of them, so a question on one
    (three turns about taxes) is no closer to it than an off-topic question; its best few cosines in the
    store are, and that reading lets the history past the floor no single turn clears."""
    from lca.recall.floor import topic_reading

    query = "estimated payment receipt penalty"
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(MANY_SUBJECTS, 1)])
        plain = s.recall(query, config=RecallConfig(store_topic=False))
        assert plain.items == () and not plain.whole_history  # no turn clears the store floor
        reading = topic_reading(s.index, s.index.query_vector(query), 0.02)
        assert reading is not None and reading.on_subject and not reading.on_centroid
        result = s.recall(query)
        assert result.whole_history and result.items
        assert result.whole_history_why.startswith("on the store's topic (mean of its 3 best cosines")
        assert {i.source for i in result.items} >= {c.source for c in plain.candidates[:3]}
        # the margin decides for the subject reading too; an off-topic question stays off
        strict = s.recall(query, config=RecallConfig(topic_margin=reading.subject - reading.subject_ceiling + 0.01))
        assert not strict.whole_history and strict.items == ()
        off = topic_reading(s.index, s.index.query_vector("Which planet has the longest day?"), 0.02)
        assert off is not None and not off.on_topic


def test_a_question_naming_what_a_small_history_names_gets_that_history_past_the_floor(tmp_path):
    from lca.recall.floor import proper_names

    assert proper_names(
        "Working title: Tidewater. The rate of Kessler GmbH's is set. Rope is in, in May, I think."
    ) == {
        "Tidewater",
        "Kessler",
        "GmbH",
    }  # a sentence's first word, a month and "I" are no names
    history = [
        "working title for my game is Tidewater, worker placement for two to four players",
        "resources are fish, salt and timber; points come from docks",
        "the playtest ran long at the cafe",
    ]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(history, 1)])
        only_names = RecallConfig(store_topic=False)
        question = "Which three resources does Tidewater use these days?"
        result = s.recall(question, config=only_names)
        assert result.whole_history and result.whole_history_why == "it names what the history names (Tidewater)"
        assert len(result.items) == len(history)
        plain = s.recall(question, config=replace(only_names, shared_names=False))
        assert not plain.whole_history and len(plain.items) < len(history)
        elsewhere = s.recall("Who designed the gardens of the Palace of Versailles?", config=only_names)
        assert not elsewhere.whole_history and elsewhere.items == ()


def test_a_question_asked_in_a_project_gets_that_projects_small_history_past_the_floor(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text, meta={"project": "atlas"}) for n, text in enumerate(SMALL_STORE, 1)])
        s.append([make_entry("o", 1, "orchard ladder painted green", meta={"project": "garden"})])
        paraphrase = "Which planet has the longest day?"  # shares nothing with the history, as a paraphrase may not
        assert s.recall(paraphrase).items == ()  # asked nowhere in particular: the floor holds
        result = s.recall(RecallContext(paraphrase, project="atlas"))
        injected = {i.source.split("[")[0] for i in result.items}
        assert result.whole_history and len(injected) == len(SMALL_STORE)
        assert "transcript:o#o:1" not in injected  # another project's turn is still held to the floor
        assert s.recall(RecallContext(paraphrase, project="atlas"), config=RecallConfig(fit_budget=False)).items == ()


def test_a_store_just_over_the_pool_is_still_ranked_whole_while_it_is_small(tmp_path):
    texts = [f"{SMALL_STORE[n % len(SMALL_STORE)]} day {n}" for n in range(60)]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(texts, 1)])
        query = "what did I tell you about my week"
        ranked_whole = s.recall(query, config=RecallConfig(pool=50, token_budget=100_000))
        assert ranked_whole.whole_history and len(ranked_whole.items) == 60
        cut = s.recall(query, config=RecallConfig(pool=50, small_store=10, token_budget=100_000))
        assert not cut.whole_history and len(cut.candidates) == 50  # past small_store: the pool decides


def test_a_question_that_resumes_work_gets_the_latest_sessions_tail_first(tmp_path):
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("a", n, f"routine {text}") for n, text in enumerate(SMALL_STORE, 1)])
        tail = ["rotate staging certificate still to do", "renewed request only", "have to run now"]
        s.append([make_entry("b", n, t, timestamp=f"2026-02-01T00:00:0{n}") for n, t in enumerate(tail, 1)])
        s.append([make_entry("b", 9, "a later note", kind=EntryKind.ASSISTANT_TURN, timestamp="2026-02-01T00:00:09")])
        tight = RecallConfig(token_budget=10_000, transcript_quota=2, resume_turns=3)
        resumed = s.recall(RecallContext("Where did we leave off?", resume=True), config=tight)
        first = [i.source.split("[")[0] for i in resumed.items[:3]]
        assert first[:3] and set(first) == {"transcript:b#b:2", "transcript:b#b:3", "transcript:b#b:9"}
        plain = s.recall(RecallContext("Where did we leave off?"), config=tight)
        assert {i.source.split("[")[0] for i in plain.items[:3]} != set(first)  # the signal, not the words
        off = s.recall(RecallContext("Where did we leave off?", resume=True), config=replace(tight, resume_turns=0))
        assert [i.source for i in off.items] == [i.source for i in plain.items]
        # a store not ranked whole: the latest session need not be among the candidates, so nothing is pinned
        large = replace(tight, small_store=0, pool=3)
        question = "Where did we leave off?"
        assert [i.source for i in s.recall(RecallContext(question, resume=True), config=large).items] == [
            i.source for i in s.recall(RecallContext(question), config=large).items
        ]


def test_a_corrected_turn_brings_the_turn_that_corrects_it(tmp_path):
    mistake = "I will create the export bucket for the nightly dumps in us-east-1 like the others"
    fix = "Wrong region: our data has to stay in eu-central-1."
    chatter = [f"nightly standup notes {n} were short" for n in range(8)]
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append([make_entry("s", n, text) for n, text in enumerate(chatter, 1)])
        s.append([make_entry("s", 20, mistake, kind=EntryKind.ASSISTANT_TURN)])
        s.append([make_entry("s", 21, fix, meta={"event": {"type": "correction", "of": "s#s:20"}})])
        query = "create the bucket for the nightly dumps"
        # reply_inheritance off: the chatter right before the mistake would score as the mistake, its reply, and
        # take one of the two slots (tests/lca/test_recall_pairing.py); this test is about the correction's pairing
        budget = RecallConfig(
            transcript_quota=2,
            token_budget=10_000,
            fit_budget=False,
            floor_mode="absolute",
            floor=0.3,
            reply_inheritance=0.0,
        )
        paired = {c.source.split("[")[0]: c for c in s.recall(query, config=budget).candidates}
        plain = {
            c.source.split("[")[0]: c
            for c in s.recall(query, config=replace(budget, correction_pairing=False)).candidates
        }
        mistake_key, fix_key = "transcript:s#s:20", "transcript:s#s:21"
        assert plain[mistake_key].why_not and "superseded" in plain[mistake_key].why_not  # held back (full LCA)
        assert not plain[fix_key].injected and plain[fix_key].cosine < 0.3  # the fix shares few of the words
        assert paired[fix_key].injected and paired[fix_key].score > plain[fix_key].score
        # without the supersession ledger (transcript-recall) the mistake is shown, and its correction beside it
        shown = s.recall(query, config=replace(budget, turn_supersession=False))
        injected = [i.source.split("[")[0] for i in shown.items]
        assert mistake_key in injected and fix_key in injected
        # a question the mistake is no match for brings neither: the superseded turn's policy filter is decided
        # before the floor, and it must not pass for having cleared it
        for ledger in (True, False):
            unrelated = s.recall(
                "What is the capital of Burkina Faso?", config=replace(budget, turn_supersession=ledger)
            )
            assert unrelated.items == ()


def test_a_turn_dated_where_the_question_points_clears_the_floor(tmp_path):
    from lca.recall.floor import query_anchor

    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("a", 1, "stretching routine neck rolls", timestamp="2026-04-03T08:30:00"),
                make_entry("b", 1, "landlord lowers rent june", timestamp="2026-04-10T19:00:00"),
                make_entry("c", 1, "grilled fish side dish", timestamp="2026-04-17T12:15:00"),
            ]
        )
        context = RecallContext("What was said on April 10?", as_of=datetime(2026, 5, 2, 9))
        result = s.recall(context)
        assert [i.source.split("[")[0] for i in result.items] == ["transcript:b#b:1"]
        assert s.recall(context, config=RecallConfig(date_anchor=False)).items == ()
    anchor = query_anchor("what did I say on 10 April", datetime(2026, 1, 5))  # no year: the latest before as_of
    assert anchor is not None and anchor.target.year == 2025


def test_floor_settings_are_validated(tmp_path):
    for field, value in (
        ("floor_mode", "relative"),
        ("fit_budget", "yes"),
        ("date_anchor", 1),
        ("floor_min", 2.0),
        ("store_topic", "on"),
        ("shared_names", 1),
        ("topic_margin", float("nan")),
    ):
        with pytest.raises(RecordFormatError) as info:
            RecallConfig.from_mapping({field: value})
        assert info.value.field == field
    path = tmp_path / "recall.yaml"
    path.write_text("floor_mode: absolute\nfloor_margin: 0.1\nfit_budget: false\n")
    loaded = RecallConfig.from_file(path)
    assert (loaded.floor_mode, loaded.floor_margin, loaded.fit_budget) == ("absolute", 0.1, False)


def test_a_turn_a_later_event_corrected_or_superseded_is_held_back_unless_history_is_asked(store):
    """The transcript's explicit events form a ledger: the corrected turn and the replaced decision are
    superseded (K, filtered) for an ordinary question, shown for a question about history, and a config
    without that ledger (transcript-recall's) ranks them like any turn."""
    store.append(
        [
            make_entry("s", 1, "the payroll export runs on the 20th of each month"),
            make_entry(
                "s",
                2,
                "no, the payroll export runs on the 25th",
                meta={"event": {"type": "correction", "of": "s#s:1", "right": "25th"}},
            ),
            make_entry("s", 3, "we decided to host the payroll reports on the wiki"),
            make_entry(
                "s",
                4,
                "we now host the payroll reports in the drive instead",
                meta={"event": {"type": "supersedes", "of": "s#s:3"}},
            ),
        ]
    )
    store.ingest()

    def injected(result):
        return {i.source.split("#")[1].split("[")[0] for i in result.items}

    plain = store.recall("when does the payroll export run and where are payroll reports hosted")
    assert injected(plain) == {"s:2", "s:4"}
    reasons = {c.source.split("#")[1].split("[")[0]: c.why_not for c in plain.omitted}
    assert "superseded" in reasons["s:1"] and "superseded" in reasons["s:3"]
    history = store.recall(RecallContext("where were payroll reports hosted before", about_history=True))
    assert "s:3" in injected(history)
    ledgerless = store.recall(
        "when does the payroll export run and where are payroll reports hosted",
        config=replace(LOW_FLOOR, turn_supersession=False),
    )
    assert {"s:1", "s:3"} <= injected(ledgerless)


def test_the_reply_to_a_superseded_decision_is_filtered_and_only_with_the_ledger(store):
    """The assistant's reply to a decision a later event superseded is about the replaced decision ("Hartley Lofts,
    a sound choice"): K holds it back as the decision itself is held back (1.0, "answers a superseded turn"), unless
    the question asks about history. The turn that records the event is never such a reply."""
    assistant = EntryKind.ASSISTANT_TURN
    store.append(
        [
            make_entry("s", 1, "we'll go with Hartley Lofts for the loft conversion"),
            make_entry("s", 2, "Hartley Lofts is a sound choice for the loft conversion", kind=assistant),
            make_entry(
                "s",
                3,
                "change of builder: Keystone Builds will do the loft conversion",
                meta={"event": {"type": "supersedes", "of": "s#s:1"}},
            ),
            make_entry("s", 4, "Keystone Builds for the loft conversion, noted", kind=assistant),
        ]
    )
    store.ingest()
    assert store.transcript.reply_to("s", "s:1") == "s:2" and store.transcript.reply_to("s", "s:2") is None
    assert store.transcript.reply_to("s", "s:3") == "s:4"  # s:3 records the event: not a reply to s:2

    ledger = candidates_by_turn(store.recall("which builder does the loft conversion"))
    assert ledger["s:2"].terms["risk"] == 1.0 and "answers a superseded turn" in ledger["s:2"].risk_reasons
    assert ledger["s:2"].why_not.startswith("policy filter") and not ledger["s:2"].injected
    assert ledger["s:4"].risk_reasons == ("the agent's own words",) and ledger["s:4"].terms["risk"] == 0.1
    assert ledger["s:4"].injected
    plain = candidates_by_turn(
        store.recall("which builder does the loft conversion", config=replace(LOW_FLOOR, turn_supersession=False))
    )
    assert plain["s:2"].risk_reasons == ("the agent's own words",) and plain["s:2"].injected
    history = candidates_by_turn(store.recall(RecallContext("which builder did we first choose", about_history=True)))
    assert "answers a superseded turn" not in history["s:2"].risk_reasons and history["s:2"].why_not is None


def test_the_reply_to_a_corrected_detail_is_penalized_not_filtered(store):
    """A reply to a detail the user then corrected may hold more than the detail (the plan built on the count), so
    K only penalizes it (0.5, "answers a replaced turn"): it ranks below the correction's reply and stays offered."""
    assistant = EntryKind.ASSISTANT_TURN
    store.append(
        [
            make_entry("s", 1, "the survey has twelve transects along the canal"),
            make_entry("s", 2, "With twelve transects along the canal, walk four a night", kind=assistant),
            make_entry(
                "s",
                3,
                "correction: the survey has ten transects along the canal, not twelve",
                meta={"event": {"type": "correction", "of": "s#s:1"}},
            ),
            make_entry("s", 4, "Ten transects along the canal, noted", kind=assistant),
        ]
    )
    store.ingest()

    ledger = candidates_by_turn(store.recall("how many transects along the canal does the survey walk"))
    assert ledger["s:2"].terms["risk"] == 0.5 and "answers a replaced turn" in ledger["s:2"].risk_reasons
    assert "answers a superseded turn" not in ledger["s:2"].risk_reasons
    assert ledger["s:2"].why_not is None or "policy filter" not in ledger["s:2"].why_not  # penalized, not filtered
    assert ledger["s:4"].score > ledger["s:2"].score
    assert "policy filter" in ledger["s:1"].why_not  # the corrected turn itself is held back


def test_the_users_turn_after_an_agent_turn_the_user_corrected_is_not_marked(store):
    """The agent wrongly called a filling vegan; the user's next turn (the prices) follows it but is the user's own
    words, not a restatement of the agent's error: K leaves it alone, while the corrected agent turn is held back."""
    assistant = EntryKind.ASSISTANT_TURN
    store.append(
        [
            make_entry("s", 1, "menu decided: four dumpling fillings including kimchi"),
            make_entry("s", 2, "A good menu, and the kimchi dumplings are vegan too", kind=assistant),
            make_entry("s", 3, "dumpling prices: eight pounds a portion of six"),
            make_entry("s", 4, "Eight pounds a portion of dumplings sits well", kind=assistant),
            make_entry(
                "s",
                5,
                "one fix: the kimchi dumplings are not vegan, the kimchi has fish sauce",
                meta={"event": {"type": "correction", "of": "s#s:2"}},
            ),
        ]
    )
    store.ingest()
    assert store.transcript.reply_to("s", "s:2") == "s:3"  # the next turn of the other side

    ledger = candidates_by_turn(store.recall("what do the dumplings cost per portion"))
    assert ledger["s:3"].risk_reasons == () and ledger["s:3"].terms["risk"] == 0.0
    assert "policy filter" in ledger["s:2"].why_not  # the agent's corrected claim itself is held back


def test_a_question_about_now_recalls_the_later_of_two_turns_about_it(tmp_path):
    """Recall's S comes from the store's ranking, which reads a question about how things stand now and lifts
    the later of the turns about it (``RetrievalConfig.now_weight``): the move to Lend Engine, not the
    spreadsheet it replaced, which the question resembles a little more."""
    from lca.retrieval import RetrievalConfig

    with Substrate(tmp_path, embedder=FakeHashingEmbedder(), recall_config=LOW_FLOOR) as s:
        s.append([make_entry("s1", 1, "We log the loans on a spreadsheet.", timestamp="2026-01-05T10:00:00")])
        s.append([make_entry("s1", 2, "The hedge trimmers need a new blade.", timestamp="2026-01-05T10:01:00")])
        s.append([make_entry("s2", 1, "We log the loans in Lend Engine from today.", timestamp="2026-03-05T10:00:00")])
        s.append([make_entry("s2", 2, "Membership is ten pounds a year.", timestamp="2026-03-05T10:01:00")])
        one = replace(LOW_FLOOR, transcript_quota=1, fit_budget=False)

        def first(query: str, config: RecallConfig) -> str:
            return [i.source.split("#")[1].split("[")[0] for i in s.recall(query, config=config).items][0]

        assert first("How do we log the loans now?", one) == "s2:1"
        assert first("How do we log the loans?", one) == "s1:1"  # not asking how things stand now
        without = replace(one, retrieval=RetrievalConfig(now_weight=0))
        assert first("How do we log the loans now?", without) == "s1:1"


def test_the_agents_own_words_rank_after_what_the_user_said(store):
    """A turn the agent wrote restates or elaborates what the user said; recalled as history it would bring the
    agent's own errors back as fact. K marks it (``agent_turn_risk``, "the agent's own words"), so of two turns the
    ranking barely separates the user's comes first, unless the question asks what the agent said."""
    said = "the spring supper venue is the River Room at the Millbrook rowing club"
    store.append([make_entry("s", 1, said), make_entry("s", 2, said, kind=EntryKind.ASSISTANT_TURN)])
    store.ingest()
    assert store.transcript.agent_turns("s") == {"s:2"} and store.transcript.agent_turns("nowhere") == frozenset()

    asked = candidates_by_turn(store.recall("where is the spring supper venue"))
    assert asked["s:2"].risk_reasons == ("the agent's own words",) and asked["s:2"].terms["risk"] == 0.1
    assert asked["s:1"].terms["risk"] == 0.0 and asked["s:1"].score > asked["s:2"].score
    for question in ("which venue did you suggest for the spring supper", "remind me of your recommendation"):
        assert (
            candidates_by_turn(store.recall(question))["s:2"].terms["risk"] == 0.0
        )  # the agent's words are the evidence
    off = candidates_by_turn(
        store.recall("where is the spring supper venue", config=replace(LOW_FLOOR, agent_turn_risk=0.0))
    )
    assert off["s:2"].terms["risk"] == 0.0 and off["s:2"].score == pytest.approx(off["s:1"].score)
    with pytest.raises(RecordFormatError) as info:
        RecallConfig(agent_turn_risk=1.5)
    assert info.value.field == "agent_turn_risk"
    store.append([make_entry("s", 3, "and the key is collected at six", kind=EntryKind.ASSISTANT_TURN)])
    assert store.transcript.agent_turns("s") == {"s:2", "s:3"}  # kept while the file does not grow, reread after


def test_a_reply_is_the_next_turn_of_the_other_side_only(tmp_path):
    from lca.transcript import TranscriptStore

    transcript = TranscriptStore(tmp_path)
    transcript.append(
        [
            make_entry("s", 1, "first"),
            make_entry("s", 2, "second, the same speaker"),
            make_entry("s", 3, "a tool runs", kind=EntryKind.TOOL_CALL),
            make_entry("s", 4, "an answer", kind=EntryKind.ASSISTANT_TURN),
            make_entry("s", 5, "a reply from someone else", author="maria"),
        ]
    )
    assert transcript.reply_to("s", "s:1") is None  # the next turn is the same side's
    assert transcript.reply_to("s", "s:2") is None  # the next entry is a tool call
    assert transcript.reply_to("s", "s:4") == "s:5" and transcript.reply_to("s", "s:5") is None
    assert transcript.reply_to("nowhere", "x") is None
