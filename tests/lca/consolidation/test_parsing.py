"""lca.consolidation.parsing: the writer's and reviewer's answers, and the mechanical checks beside them."""

from __future__ import annotations

import pytest

from lca.consolidation import lexical_support, parse_review, parse_writer_output
from lca.consolidation.parsing import REFUSAL, failure_kind, slug


def test_writer_output_parsing_is_tolerant_of_shape_but_not_of_content():
    found, prevented, unparsed = parse_writer_output(
        "Here you go:\n- decision | The team uses PostgreSQL 16. | 1, 3\n2. Facts | Ana likes tea | [2]\n"
        "prevented | rule-staging | 4 | deployed to staging first\nrule | | 1\nNONE"
    )
    assert found == [("decision", "The team uses PostgreSQL 16.", [1, 3]), ("fact", "Ana likes tea", [2])]
    assert prevented == [("rule-staging", "deployed to staging first", 4, "deployed to staging first")]
    assert unparsed == 2  # the preamble and the rule with an empty statement


def test_a_prevented_line_without_a_line_number_is_not_counted():
    found, prevented, unparsed = parse_writer_output("prevented | rule-staging | somewhere | it helped")
    assert (found, prevented, unparsed) == ([], [], 1)


def test_review_parsing_needs_support_and_verdict_and_notes_reasoning_order():
    review = parse_review(
        "REASONING: the line says so.\nmore thoughts\nSUPPORTED: Yes\nCONTRADICTS: m-1\nVERDICT: Supersede."
    )
    assert review == {
        "verdict": "supersede",
        "supported": True,
        "contradicts": "m-1",
        "reasoning": "the line says so. more thoughts",
        "reasoning_first": True,
    }
    late = parse_review("VERDICT: accept\nSUPPORTED: yes\nREASONING: late")
    assert late is not None and late["reasoning_first"] is False and late["contradicts"] is None
    assert parse_review("**SUPPORTED**: no\n**VERDICT**: reject\nCONTRADICTS: none.")["supported"] is False
    assert parse_review("VERDICT: accept") is None  # no SUPPORTED
    assert parse_review("SUPPORTED: yes\nVERDICT: maybe") is None


def test_lexical_support_is_the_share_of_the_claims_key_terms_in_the_cited_lines():
    assert lexical_support("Ana prefers green tea", ["Ana said she prefers green tea."]) == 1.0
    assert 0 < lexical_support("Ana prefers green tea", ["Ana drinks coffee."]) < 1
    assert lexical_support("", ["anything"]) == 0.0


@pytest.mark.parametrize("exc,kind", [(TimeoutError("slow"), "timeout"), (RuntimeError("boom"), "error")])
def test_generator_failures_are_classified(exc, kind):
    assert failure_kind(exc) == kind


def test_refusals_and_slugs():
    assert REFUSAL.search("I'm unable to help with that") and not REFUSAL.search("fact | x | 1")
    assert slug("The billing DB is PostgreSQL 16!") == "the-billing-db-is-postgresql-16"
    assert slug("!!!") == "memory"
