"""lca bench retrieval on small files in the official formats, with the fake embedder; temporal anchors."""

from __future__ import annotations

import json
import lzma
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import protocols.cli as cli
from lca.index.chunker import Chunker, sentence_keys
from lca.params import ParameterError
from protocols.bench.retrieval.config import HYBRID_DEFAULTS, HybridConfig, ablations, used_weights
from protocols.bench.retrieval.ranking import QuerySignals, UnitIndex, hybrid_scores, ranking_of
from protocols.bench.retrieval.runners import run_locomo, run_longmemeval
from protocols.bench.retrieval.units import locomo_units, without_names
from tests.fakes import FakeHashingEmbedder

REPO = Path(__file__).resolve().parents[2]


def lme_file(tmp_path) -> Path:
    def session(texts, gold_turn=None):
        turns = []
        for i, text in enumerate(texts):
            answer = {"has_answer": i == gold_turn} if gold_turn is not None else {}
            turns.append({"role": "user", "content": text, **answer})
            turns.append({"role": "assistant", "content": "noted"})
        return turns

    filler = [session([f"thoughts about topic {n} and weather {n}"]) for n in range(8)]
    records = [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "What breed is my dog Rex?",
            "answer": "a beagle",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_rex"],
            "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
            "haystack_sessions": filler + [session(["hello", "My dog Rex is a beagle"], gold_turn=1)],
            "answer_session_ids": ["answer_rex"],
        },
        {
            "question_id": "q2",
            "question_type": "temporal-reasoning",
            "question": "What did I cook two weeks ago?",
            "answer": "risotto",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": [f"s{n}" for n in range(8)] + ["answer_cook"],
            "haystack_dates": [f"2023/05/{n + 1:02d} (Mon) 10:00" for n in range(8)] + ["2023/05/16 (Tue) 10:00"],
            "haystack_sessions": filler + [session(["I made a mushroom risotto tonight"], gold_turn=0)],
            "answer_session_ids": ["answer_cook"],
        },
        {
            "question_id": "q3_abs",
            "question_type": "single-session-user",
            "question": "What is my cat's name?",
            "answer": "unknown",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": ["s0"],
            "haystack_dates": ["2023/05/01 (Mon) 10:00"],
            "haystack_sessions": filler[:1],
            "answer_session_ids": [],
        },
    ]
    path = tmp_path / "lme.json.xz"
    path.write_bytes(lzma.compress(json.dumps(records).encode()))
    return path


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid", "resonance"])
def test_longmemeval_retrieval_finds_the_evidence_and_drops_abstention(tmp_path, retriever):
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    report = run_longmemeval(
        lme_file(tmp_path),
        retriever,
        embedder=embedder,
        chunker=Chunker(embedder),
        limit=None,
        progress=lambda x: x,
        workdir=tmp_path / "work",
    )
    assert report["strict"]["n"] == 2 and report["lenient"]["n"] == 2 and report["questions"] == 3
    assert report["strict"]["session"]["recall_any@10"] == 1.0
    if retriever in ("bm25", "hybrid"):
        assert report["per_question"][0]["metrics"]["session"]["recall_any@1"] == 1.0  # "Rex" / "beagle" match
    if retriever == "hybrid":
        assert report["per_question"][1]["anchor"] == "two weeks ago"
        assert all(q["seconds"] >= 0 for q in report["per_question"])
        assert report["per_question"][1]["metrics"]["session"]["recall_any@1"] == 1.0  # the anchored day wins


def test_locomo_retrieval_on_the_committed_fixture(tmp_path):
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    report = run_locomo(
        REPO / "data" / "fixtures" / "locomo_fixture.json",
        "hybrid",
        embedder=embedder,
        chunker=Chunker(embedder),
        limit=None,
        progress=lambda x: x,
        workdir=tmp_path,
    )
    assert report["items"] == 3 and report["overall"]["recall@25"] == 1.0
    assert set(report["by_category"]) == {"1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "5 adversarial"}


def test_bench_retrieval_names_a_missing_data_path(tmp_path, capsys):
    assert cli.main(["bench", "retrieval", "--dataset", "locomo", "--data", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def locomo_record() -> dict:
    turns_1 = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat last week."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "What did you name the cat?"},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "Pebble, after the beach stones."},
    ]
    turns_2 = [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "I started climbing at the Granite Loft gym."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Tax forms are due soon, ugh."},
    ]
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns_1,
            "session_2_date_time": "3:00 pm on 9 June, 2023",
            "session_2": turns_2,
            "session_3_date_time": "a date key with no session",
        },
        "qa": [
            {"question": "What is the name of Ana's cat?", "answer": "Pebble", "evidence": ["D1:3"], "category": 4},
            {
                "question": "Where did Ben start climbing on 7 June, 2023?",
                "answer": "Granite Loft",
                "evidence": ["D2:1; D9:99", "D"],
                "category": 4,
            },
        ],
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana named her new grey cat Pebble.", "D1:3"], ["Ana adopted a cat.", ["D1:1", "D1:3"]]]
            },
            "session_2_observation": {"Ben": [["Ben climbs at the Granite Loft gym.", "D2:1"]]},
        },
        "session_summary": {
            "session_1_summary": "Ana adopted a grey cat and named it Pebble.",
            "session_2_summary": "Ben took up climbing at the Granite Loft.",
        },
    }


def test_locomo_units_say_which_dialog_turns_each_unit_covers():
    record = locomo_record()
    turns = locomo_units(record, "turns")
    assert turns["covers"] == [["D1:1"], ["D1:2"], ["D1:3"], ["D2:1"], ["D2:2"]]  # the stray date key is skipped
    assert turns["texts"][1] == "Ben: What did you name the cat?" and turns["speaker"][0] == "Ana"
    assert turns["asks"] == [False, True, False, False, False]
    observations = locomo_units(record, "observations")
    assert observations["covers"] == [["D1:3"], ["D1:1", "D1:3"], ["D2:1"]]
    summaries = locomo_units(record, "summaries")
    assert summaries["covers"] == [["D1:1", "D1:2", "D1:3"], ["D2:1", "D2:2"]]
    with pytest.raises(ValueError, match="observations"):
        locomo_units(record, "events")


@pytest.mark.parametrize("units", ["turns", "observations", "summaries"])
def test_locomo_recall_counts_evidence_through_the_units_that_cover_it(tmp_path, units):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([locomo_record()]))
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    report = run_locomo(
        path,
        "hybrid",
        embedder=embedder,
        chunker=Chunker(embedder),
        limit=None,
        progress=lambda x: x,
        workdir=tmp_path / "work",
        units=units,
    )
    assert report["units"] == units and report["items"] == 2
    assert report["unparsed_evidence_ids"] == 2  # "D9:99" names no turn, "D" is malformed; both counted
    assert [item["evidence"] for item in report["per_item"]] == [["D1:3"], ["D2:1"]]
    assert all(item["seconds"] >= 0 for item in report["per_item"])  # each item's time, for the distribution
    assert [item["anchor"] for item in report["per_item"]] == [None, "7 June, 2023"]
    # the runner reports the weights it could act on: context keys are built for turns only
    assert ("context_weight" in report["weights_used"]) == (units == "turns")
    assert ("question_weight" in report["weights_used"]) == (units == "turns")
    # one summary covers a whole session, so @1 finds the evidence; every unit kind finds it by @5
    assert report["overall"]["recall@5"] == 1.0
    if units == "summaries":
        assert report["overall"]["recall@1"] == 1.0


# ---- the hybrid retriever's parts -------------------------------------------------------------------
def test_sentence_keys_split_only_multi_sentence_texts():
    text = "I'm looking for recipe ideas for tonight. By the way, I replaced my kitchen faucet last Sunday!"
    assert sentence_keys(text) == [
        "I'm looking for recipe ideas for tonight.",
        "By the way, I replaced my kitchen faucet last Sunday!",
    ]
    assert sentence_keys("Just one sentence here, nothing more.") == []
    assert len(sentence_keys(". ".join(f"Sentence number {i} is here" for i in range(60)), limit=40)) == 40


def test_sentence_keys_lift_a_remark_in_passing_and_never_lower_a_unit():
    embedder = FakeHashingEmbedder(dimension=512, max_input_tokens=200)
    texts = [
        "I want recipe ideas for a quick weeknight dinner with rice, beans, greens, tofu, peppers, onions, "
        "garlic, "
        "ginger, sesame oil, soy sauce and lime that my whole family would enjoy on busy evenings after school. "
        "By the way, I replaced my kitchen faucet.",
        "Which kitchen faucet brands last longest?",
        "Tax forms are due soon.",
    ]
    plain = UnitIndex(texts, embedder, Chunker(embedder))
    keyed = UnitIndex(texts, embedder, Chunker(embedder), sentences=True)
    query = "I replaced my kitchen faucet"
    assert np.all(keyed.dense(query) >= plain.dense(query) - 1e-6)
    assert ranking_of(plain.dense(query))[0] == 1 and ranking_of(keyed.dense(query))[0] == 0


def test_reply_signal_lifts_the_turn_that_answers_a_matching_question():
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    texts = [
        "Ben: What did you name the grey cat you adopted?",
        "Ana: Pebble, after the stones on the beach.",
        "Ana: The cat sleeps all day.",
        "Ben: Tax forms are due soon.",
        "Ana: I like climbing.",
    ]
    units = UnitIndex(texts, embedder, Chunker(embedder))
    replies_to = np.array([-1, 0, -1, -1, -1])
    query = "What did Ana name the grey cat she adopted?"
    quiet = HybridConfig(feedback_weight=0.0, reply_weight=0.0)
    without = ranking_of(hybrid_scores(units, query, quiet).astype(np.float32))
    with_replies = ranking_of(
        hybrid_scores(
            units, query, replace(quiet, reply_weight=1.0), signals=QuerySignals(replies_to=replies_to)
        ).astype(np.float32)
    )
    assert with_replies.index(1) < without.index(1) and with_replies[:2] == [0, 1]


def test_question_signal_lowers_a_turn_that_only_asks_and_its_reply_inherits_less():
    record = locomo_record()
    record["conversation"]["session_1"][1]["blip_caption"] = "a photo of a grey cat"
    assert locomo_units(record, "turns")["asks"][1] is False  # a shared photo is content, however it is asked
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    texts = [
        "Ben: What did you name the grey cat you adopted?",
        "Ana: Pebble, after the stones on the beach.",
        "Ana: The grey cat sleeps all day.",
        "Ben: Tax forms are due soon.",
        "Ana: I like climbing.",
    ]
    units = UnitIndex(texts, embedder, Chunker(embedder))
    query = "What did Ana name the grey cat she adopted?"
    signals = QuerySignals(replies_to=np.array([-1, 0, -1, -1, -1]), asks=np.array([1.0, 0, 0, 0, 0]))
    config = HybridConfig(feedback_weight=0.0, reply_weight=0.3)
    plain = hybrid_scores(units, query, config, signals=signals)
    lowered = hybrid_scores(units, query, replace(config, question_weight=2.0), signals=signals)
    assert ranking_of(plain.astype(np.float32))[0] == 0  # the question repeats the query's words
    assert ranking_of(lowered.astype(np.float32))[0] != 0
    assert lowered[0] == pytest.approx(plain[0] - 2.0)
    assert lowered[1] < plain[1]  # its reply inherits from the lowered question
    np.testing.assert_allclose(lowered[2:], plain[2:])  # statements are untouched


def test_feedback_pulls_in_units_that_resemble_the_top_hits():
    embedder = FakeHashingEmbedder(max_input_tokens=200)
    texts = [
        "my dog rex loves the beach",
        "rex chases seagulls and waves at the beach every morning",
        "tax forms are due friday",
        "the printer is out of toner",
        "a recipe for lentil soup",
    ]
    units = UnitIndex(texts, embedder, Chunker(embedder))
    query = "where does my dog love to go"
    without = hybrid_scores(units, query, HybridConfig(feedback_weight=0.0))
    fed_back = hybrid_scores(units, query, HybridConfig(feedback_weight=1.0, feedback_depth=1))
    assert ranking_of(without.astype(np.float32))[0] == 0
    # unit 1 shares no word with the query, but "rex" and "beach" with the top hit
    assert fed_back[1] - fed_back[2:].max() > without[1] - without[2:].max()


def test_context_key_holds_the_configured_neighbours_and_stops_at_the_session():
    texts, sessions = ["a1", "a2", "a3", "b1", "b2"], ["a", "a", "a", "b", "b"]
    headers = ["[h0]", "[h1]", "[h2]", "[h3]", "[h4]"]
    keys = HybridConfig(context_before=2, context_after=1).context_texts(texts, sessions, headers)
    assert keys[2] == "[h2]\na1\na2\na3"  # two before, none after: a3 ends its session
    assert keys[3] == "[h3]\nb1\nb2"  # nothing from session a leaks in
    assert HybridConfig(context_before=0, context_after=0).context_texts(texts, sessions) == texts
    with pytest.raises(ValueError, match="context_before"):
        HybridConfig(context_before=-1)


def test_speaker_names_leave_only_the_embedded_query(tmp_path):
    assert (
        without_names("What did Caroline's mentor tell caroline about Mel?", ["Caroline Smith", "Melanie"])
        == "What did mentor tell about Mel?"
    )  # first names, possessives, any case; "Mel" is not "Melanie"

    class RecordingEmbedder(FakeHashingEmbedder):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.queries: list[str] = []

        def embed_query(self, text):
            self.queries.append(text)
            return super().embed_query(text)

    record = locomo_record()
    record["qa"] = record["qa"][:1]  # "What is the name of Ana's cat?"
    for names_in_query, expected in ((True, "What is the name of Ana's cat?"), (False, "What is the name of cat?")):
        path = tmp_path / f"names-{names_in_query}" / "locomo.json"
        path.parent.mkdir()
        path.write_text(json.dumps([record]))
        embedder = RecordingEmbedder(max_input_tokens=200)
        config = HybridConfig(speaker_weight=0.6, names_in_dense_query=names_in_query)
        report = run_locomo(
            path,
            "hybrid",
            embedder=embedder,
            chunker=Chunker(embedder),
            limit=None,
            progress=lambda x: x,
            workdir=path.parent / "work",
            config=config,
        )
        assert embedder.queries == [expected] and report["items"] == 1


def test_hybrid_config_overrides_are_checked_by_name_and_type():
    config = HybridConfig().with_overrides(["feedback_weight=0.2", "sentences=off", "feedback-depth=5"])
    assert (config.feedback_weight, config.sentences, config.feedback_depth) == (0.2, False, 5)
    with pytest.raises(ParameterError, match="speaker_weight"):  # the message lists the known names
        HybridConfig().with_overrides(["bogus=1"])
    with pytest.raises(ParameterError, match="--set 'bm25_weight=lots': takes a number"):  # lca.params' format
        HybridConfig().with_overrides(["bm25_weight=lots"])
    with pytest.raises(ParameterError, match="sentences"):
        HybridConfig().with_overrides(["sentences=maybe"])
    with pytest.raises(ValueError, match="feedback_depth"):
        HybridConfig().with_overrides(["feedback_depth=0"])


def test_bench_retrieval_refuses_options_that_do_not_apply(tmp_path, capsys):
    data = str(REPO / "data" / "fixtures" / "locomo_fixture.json")
    assert cli.main(["bench", "retrieval", "--dataset", "longmemeval", "--units", "observations"]) == 2
    assert "LoCoMo only" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "bench",
                "retrieval",
                "--dataset",
                "locomo",
                "--data",
                data,
                "--set",
                "bogus=1",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
        == 2
    )
    assert "bogus" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "bench",
                "retrieval",
                "--dataset",
                "locomo",
                "--data",
                data,
                "--sentence-keys",
                "on",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
        == 2
    )
    assert "--retriever resonance" in capsys.readouterr().err


def test_resonance_retriever_can_build_its_substrate_with_sentence_keys(tmp_path):
    from protocols.bench.retrieval.resonance import ResonanceIndex

    texts = [
        "I want recipe ideas for a quick weeknight dinner with rice, beans, greens, tofu, peppers, onions, "
        "garlic and lime that my whole family would enjoy after school. By the way, I replaced my kitchen "
        "faucet last Sunday.",
        "Which kitchen faucet should I buy for my sink?",
        "Tax forms are due soon.",
    ]
    first = {}
    for keyed in (False, True):
        index = ResonanceIndex(
            texts,
            [None] * 3,
            FakeHashingEmbedder(dimension=512, max_input_tokens=200),
            tmp_path / f"work-{keyed}",
            sentence_keys=keyed,
        )
        try:
            first[keyed] = index.rank("I replaced my kitchen faucet")[0]
        finally:
            index.close()
    assert first == {False: 1, True: 0}  # the remark in passing wins only through its own sentence key


# ---- --ablate: one run per part of the hybrid that is on ------------------------------------------------
def test_ablations_turn_off_exactly_one_part_that_the_run_uses():
    def changed(a: HybridConfig, b: HybridConfig) -> set[str]:
        return {f for f in vars(a) if getattr(a, f) != getattr(b, f)}

    locomo = HYBRID_DEFAULTS["locomo"]
    variants = ablations(locomo, uses=used_weights("locomo", context=True, anchors=True, units="turns"))
    assert set(variants) == {
        "bm25_weight=0",
        "context_weight=0",
        "anchor_weight=0",
        "feedback_weight=0",
        "question_weight=0",
        "reply_weight=0",
        "speaker_weight=0",
        "sentences=off",
        "names_in_dense_query=on",
    }
    assert all(len(changed(locomo, v)) == 1 for v in variants.values())
    # LongMemEval builds no context key and no turn signals; with anchors off the anchor weight is idle too
    lme = ablations(
        HYBRID_DEFAULTS["longmemeval"], uses=used_weights("longmemeval", context=False, anchors=False, units="turns")
    )
    assert set(lme) == {"bm25_weight=0", "feedback_weight=0", "sentences=off"}
    summaries = ablations(locomo, uses=used_weights("locomo", context=False, anchors=True, units="summaries"))
    assert set(summaries) == {"bm25_weight=0", "anchor_weight=0", "feedback_weight=0", "sentences=off"}


def test_bench_retrieval_ablate_writes_one_row_per_variant(tmp_path, monkeypatch, capsys):
    import lca.index.embedders as embedders

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", lambda: FakeHashingEmbedder(max_input_tokens=200))
    out = tmp_path / "locomo-hybrid.json"
    data = str(REPO / "data" / "fixtures" / "locomo_fixture.json")
    assert (
        cli.main(
            [
                "bench",
                "retrieval",
                "--dataset",
                "locomo",
                "--data",
                data,
                "--ablate",
                "--quiet",
                "--set",
                "reply_weight=0",
                "--cache",
                str(tmp_path / "cache"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    ablation = json.loads((tmp_path / "locomo-hybrid-ablation.json").read_text())
    assert "reply_weight=0" not in ablation["variants"]  # already off: nothing to ablate
    assert "question_weight=0" in ablation["variants"] and "sentences=off" in ablation["variants"]
    main = json.loads(out.read_text())
    assert ablation["default"]["recall@5"] == main["overall"]["recall@5"]
    for row in ablation["variants"].values():
        assert row["delta"]["recall@5"] == pytest.approx(row["metrics"]["recall@5"] - ablation["default"]["recall@5"])
    assert ablation["variants"]["feedback_weight=0"]["config"]["feedback_weight"] == 0.0
    assert ablation["provenance"]["sha256"] == main["provenance"]["sha256"]
    table = (tmp_path / "locomo-hybrid-ablation.md").read_text()
    assert table.count("\n| ") == 3 + len(ablation["variants"])  # header, rule, default, one row per variant
    assert (
        cli.main(
            [
                "bench",
                "retrieval",
                "--dataset",
                "locomo",
                "--data",
                data,
                "--ablate",
                "--retriever",
                "dense",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "--retriever hybrid" in capsys.readouterr().err
