"""An established schema's taxonomy tags: on its members and on the records whose signature it predicts, derived
(rebuilt byte for byte), refreshed by the cycle for records signed later, gone with the schema's deprecation."""

from __future__ import annotations

from lca.insight import insight_detail
from lca.insight.schemas import establish_schema, propose_schema, start_trial
from lca.insight.taxonomy import SchemaTag, record_taxonomy, refresh_taxonomy, tags_of
from lca.layout import StoreLayout
from lca.ledger import Ledger
from tests.lca.insight.corpus import CORPUS
from tests.lca.insight.test_review import write_cited
from tests.lca.insight.test_schema_gates import NEWCOMERS, cycle, log_recalls, write_now


def test_an_established_schema_tags_what_it_covers_and_nothing_else(tmp_path):
    write_cited(tmp_path, CORPUS, {})
    (rec,) = cycle(tmp_path, CORPUS).reconciliations
    propose_schema(tmp_path, "boom-bust", "a population feeds on a stock it drains", insight=rec.hypothesis)
    cycle(tmp_path, CORPUS)  # the insight surfaces again, so its trial gates pass
    start_trial(tmp_path, "boom-bust")
    assert refresh_taxonomy(tmp_path) == {}  # on trial: no tag yet
    write_now(tmp_path, NEWCOMERS[:1])
    cycle(tmp_path, [*CORPUS, *NEWCOMERS[:1]])
    log_recalls(tmp_path, "eco-wolves", "eco-meadow", 6)
    write_now(tmp_path, NEWCOMERS[1:])
    cycle(tmp_path, [*CORPUS, *NEWCOMERS])
    establish_schema(tmp_path, "boom-bust", approver="dana")
    tags = refresh_taxonomy(tmp_path)
    assert tags == {
        "eco-wolves": (SchemaTag("boom-bust", 1, "member"),),
        "kit-sourdough": (SchemaTag("boom-bust", 1, "member"),),
        "fin-boom": (SchemaTag("boom-bust", 1, "predicted"),),
        "kit-starter": (SchemaTag("boom-bust", 1, "predicted"),),
    }
    path = StoreLayout(tmp_path).insight_taxonomy
    written = path.read_bytes()
    path.unlink()
    refresh_taxonomy(tmp_path)
    assert path.read_bytes() == written and record_taxonomy(tmp_path) == tags  # derived: rebuilt the same
    (wolves,) = [m for m in insight_detail(tmp_path, rec.hypothesis)["members"] if m["id"] == "eco-wolves"]
    assert wolves["schemas"] == [{"schema": "boom-bust", "version": 1, "how": "member"}]
    assert tags_of("memory:fin-boom[0:40]", tags) == ["boom-bust v1"] and tags_of("transcript:s#e1", tags) == []
    # a record of the same skeleton signed by a later cycle is tagged by that cycle
    late = ("fin-late", "finance", "Lenders flood a hot market; loans climb, borrowers default, lenders retreat.")
    write_now(tmp_path, [(*late, "oscillator")])
    cycle(tmp_path, [*CORPUS, *NEWCOMERS, (*late, "oscillator")])
    assert record_taxonomy(tmp_path)["fin-late"] == (SchemaTag("boom-bust", 1, "predicted"),)
    # deprecated: its tags go at the next refresh
    Ledger(tmp_path).schema_event("schema_deprecated", "boom-bust", reason="superseded by a finer schema")
    assert refresh_taxonomy(tmp_path) == {} and record_taxonomy(tmp_path) == {}
