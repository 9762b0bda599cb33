"""Temporal anchors: relative times read against the question's date, absolute dates as they stand."""

from __future__ import annotations

from datetime import datetime

from lca.temporal_anchor import anchor_weight, temporal_anchor


def test_temporal_anchors_read_relative_times_against_the_question_date():
    asked = datetime(2023, 4, 22, 8, 1)  # a Saturday
    assert temporal_anchor("Who did I go with last Saturday?", asked).target == datetime(2023, 4, 15)
    assert temporal_anchor("What did I plant two weeks ago?", asked).target == datetime(2023, 4, 8)
    assert temporal_anchor("What happened 5 days ago?", asked).target == datetime(2023, 4, 17)
    assert temporal_anchor("What did I do yesterday?", asked).target == datetime(2023, 4, 21)
    assert temporal_anchor("How many plants did I buy in the last month?", asked).tolerance_days == 15.0
    assert temporal_anchor("What is my dog's name?", asked) is None and temporal_anchor("x ago", None) is None
    anchor = temporal_anchor("two weeks ago", asked)
    assert anchor_weight(anchor, datetime(2023, 4, 8, 18)) == 1.0
    assert 0 < anchor_weight(anchor, datetime(2023, 4, 10)) < 1 and anchor_weight(anchor, datetime(2023, 3, 1)) == 0.0


def test_absolute_dates_anchor_the_days_that_tell_of_them():
    day = temporal_anchor("What movie did Joanna watch on 1 May, 2022?", None)
    assert day.expression == "1 May, 2022"
    assert temporal_anchor("Who called on May 1st, 2022?", None).target == day.target
    # told that day or in the week after ("last night", "last weekend"); never before it
    assert anchor_weight(day, datetime(2022, 4, 30)) == 0.0 and anchor_weight(day, datetime(2022, 5, 8)) == 0.0
    # every day of that week alike: the record of the evening itself is as likely as one from days later
    assert all(anchor_weight(day, datetime(2022, 5, d, 20)) == 1.0 for d in range(1, 8))
    month = temporal_anchor("What did Maria donate in December 2023?", None)
    # the whole month alike (its last days as much as its middle), and the week after it, then nothing
    assert all(anchor_weight(month, datetime(2023, 12, d)) == 1.0 for d in (1, 16, 31))
    assert anchor_weight(month, datetime(2024, 1, 6)) == 1.0 and anchor_weight(month, datetime(2024, 1, 7)) == 0.0
    assert anchor_weight(month, datetime(2023, 11, 30)) == 0.0
    february = temporal_anchor("What did Maria plant in February 2024?", None)  # a leap year's 29 days
    assert anchor_weight(february, datetime(2024, 3, 6)) == 1.0 and anchor_weight(february, datetime(2024, 3, 7)) == 0.0
    assert temporal_anchor("What happened on 31 June, 2023?", None).expression == "June, 2023"  # no such day
    assert temporal_anchor("What did I do on May 8?", None) is None  # no year: too loose to anchor
    asked = datetime(2023, 4, 22)  # a relative time wins over an absolute date in the same question
    assert temporal_anchor("What did I buy two weeks ago, on 1 May, 2022?", asked).target == datetime(2023, 4, 8)


def test_last_week_and_last_weekend_point_at_their_days():
    asked = datetime(2023, 4, 19, 15)  # a Wednesday
    week = temporal_anchor("What did I cook last week?", asked)
    assert week.target == datetime(2023, 4, 12) and week.tolerance_days == 4.5
    weekend = temporal_anchor("Where did we hike last weekend?", asked)
    assert weekend.target == datetime(2023, 4, 15, 12)  # between Saturday and Sunday
    assert anchor_weight(weekend, datetime(2023, 4, 16, 9)) > 0 and anchor_weight(weekend, None) == 0.0


def test_a_day_without_a_year_is_its_latest_occurrence_before_the_question(tmp_path):
    """Read by the ranking as by the floor (one reading): "on 17 March" asked in June is this year's, asked
    in January last year's; a dated day keeps its year, and no question date leaves it unread."""
    from lca.substrate import Substrate
    from tests.conftest import make_entry
    from tests.fakes import FakeHashingEmbedder

    june, january = datetime(2025, 6, 25, 9), datetime(2026, 1, 5)
    assert temporal_anchor("What was decided on 17 March?", june).target == datetime(2025, 3, 17)
    assert temporal_anchor("what did I say on March 17th", january).target == datetime(2025, 3, 17)
    assert temporal_anchor("What was decided on 17 March 2024?", june).target == datetime(2024, 3, 17)
    assert temporal_anchor("What was decided on 17 March?", None) is None
    assert temporal_anchor("What was decided on 31 February?", june) is None  # no such day
    with Substrate(tmp_path, embedder=FakeHashingEmbedder()) as s:
        s.append(
            [
                make_entry("a", 1, "tariff fix decided exit fee checked", timestamp="2025-02-25T20:00:00"),
                make_entry("b", 1, "we stay on the fix then move to flux", timestamp="2025-03-17T19:10:00"),
                make_entry("c", 1, "tariff decided tariff fix", timestamp="2025-05-06T19:30:00"),
            ]
        )
        question = "What was decided on 17 March about the tariff fix?"
        undated = [h.pointer.entry_id for h in s.search(question, k=3)]
        dated = [h.pointer.entry_id for h in s.search(question, k=3, as_of=june)]
        assert undated[0] != "b:1" and dated[0] == "b:1"  # the turn of that day leads once the day is read
