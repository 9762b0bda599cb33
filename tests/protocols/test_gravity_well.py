"""The gravity-well simulation behind `lca bench gravity-well`."""

from __future__ import annotations


def test_defenses_flatten_the_gravity_well():
    from protocols.bench.gravity_well import simulate

    figures = simulate(queries=1500, records=1000, topics=50, seed=3)["figures"]
    well = figures["use_weighted"]["top1pct_share"]
    defended = figures["living_defenses"]["top1pct_share"]
    assert well > 1.3 * figures["relevance_only"]["top1pct_share"]  # the well is real in this stream
    assert defended < 0.8 * well
    assert figures["living_defenses"]["records_ever_recalled"] > figures["use_weighted"]["records_ever_recalled"]
