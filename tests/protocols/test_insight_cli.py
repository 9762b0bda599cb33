"""``lca integrate`` and ``lca insights`` from the shell, with a scripted fake summarizer and a fake embedder."""

from __future__ import annotations

import json
import time

import pytest

import protocols.cli as cli
import protocols.cli.common as cli_common
import protocols.cli.insight as cli_insight
from lca.activation import Access, RetrievalLog
from lca.substrate import Substrate
from tests.fakes import FakeHashingEmbedder
from tests.lca.insight.corpus import CORPUS, fake_signer_generator, write_memories


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    write_memories(home, CORPUS)
    monkeypatch.setattr(
        cli_common,
        "open_store",
        lambda args, progress=False: Substrate(home, embedder=FakeHashingEmbedder(dimension=512, max_input_tokens=512)),
    )
    monkeypatch.setattr(cli_insight, "_generator", lambda model, **kw: fake_signer_generator(CORPUS))
    monkeypatch.setenv(cli_common.HOME_ENV, str(home))
    return home


def test_integrate_surfaces_the_rhyme_and_the_queue_lists_shows_and_refutes_it(home, capsys):
    assert cli.main(["integrate"]) == 0
    out = capsys.readouterr().out
    assert "signatures: 12 new, 0 reused" in out and "surfaced 1 candidate(s)" in out
    assert "[proposed]" in out and "eco-wolves, kit-sourdough" in out
    assert "centrality refreshed: 12 records, links: evidence 0, member 2, lateral 0; converged" in out
    assert cli.main(["insights", "list", "--order", "centrality"]) == 0
    assert "centrality 2.23" in capsys.readouterr().out  # its two records are more central than the average node
    assert cli.main(["insights", "list", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert item["records"] == ["eco-wolves", "kit-sourdough"] and item["status"] == "proposed"
    assert cli.main(["insights", "show", item["id"]]) == 0
    shown = capsys.readouterr().out
    assert "eco-wolves [ecology]" in shown and "balancing loop of population -> population" in shown
    assert cli.main(["insights", "refute", item["id"]]) == 2
    assert "reason and a reviewer" in capsys.readouterr().err
    assert cli.main(["insights", "refute", item["id"], "--reason", "coincidence", "--by", "dana"]) == 0
    capsys.readouterr()
    assert cli.main(["insights", "list"]) == 0
    assert "no insight waits for review" in capsys.readouterr().out
    assert cli.main(["insights", "list", "--all"]) == 0
    assert "dormant" in capsys.readouterr().out
    # a second cycle reuses every signature and sees the dormant entry again without reviving it
    assert cli.main(["integrate", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["distill"]["reused"] == 12 and report["distill"]["signed"] == 0
    assert [r["action"] for r in report["reconciliations"]] == ["observed_dormant"]


def test_integrate_reports_its_probes_and_the_queue_marks_what_a_probe_found(home, capsys):
    RetrievalLog(home).record([Access("memory:eco-wolves[0:40]", time.time() - 30, 1)])
    assert cli.main(["integrate", "--max-surfaced", "0", "--probe-max-surfaced", "1"]) == 0
    out = capsys.readouterr().out
    assert "surfaced 0 candidate(s), deferred 1" in out
    assert "probes: hot eco-wolves (0.9" in out and "surfaced 1, deferred 0 (at most 1 a cycle)" in out
    assert "[proposed, probe]" in out
    assert cli.main(["insights", "list"]) == 0
    assert "proposed  (probe)" in capsys.readouterr().out


def test_bad_input_is_one_line_naming_what_is_wrong(home, capsys, tmp_path):
    assert cli.main(["insights", "show", "hyp-nothing"]) == 2
    assert "no insight hypothesis 'hyp-nothing'" in capsys.readouterr().err
    assert cli.main(["insights", "show"]) == 2
    assert "name the insight id" in capsys.readouterr().err
    assert cli.main(["integrate", "--content-weight", "5"]) == 2
    assert "content_weight" in capsys.readouterr().err
    assert cli.main(["insights", "list", "--store", str(tmp_path / "nowhere")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_the_queue_shows_each_lens_verdict_and_the_recovery_rate(home, capsys):
    assert cli.main(["integrate"]) == 0
    out = capsys.readouterr().out
    # the planted records cite no transcript session: independence cannot be shown, so the review is contested
    assert "review hyp-" in out and "contested (veto: structural-soundness supports 1.00" in out
    assert "recovery rate -: of 0 refuted" in out
    assert cli.main(["insights", "list"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("recovery rate -") and "evidence-independence weak 0.50" in listed
    assert cli.main(["insights", "list", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert item["review"]["outcome"] == "contested"
    assert cli.main(["insights", "show", item["id"]]) == 0
    assert "cite no transcript source" in capsys.readouterr().out
    assert cli.main(["insights", "review"]) == 0
    assert "no live insight needs a review" in capsys.readouterr().out
    assert cli.main(["insights", "review", item["id"], "--review-rule", "mean"]) == 0
    assert "survived (mean:" in capsys.readouterr().out
    assert cli.main(["integrate", "--no-review", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reviews"] == []


def test_the_taxonomy_lists_no_tag_before_a_schema_is_established(home, capsys):
    assert cli.main(["integrate"]) == 0
    capsys.readouterr()
    assert cli.main(["insights", "taxonomy"]) == 0
    assert "no record is covered by an established schema" in capsys.readouterr().out
    assert cli.main(["insights", "taxonomy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {}
