"""Operational freshness: the task (``freshness.py``), its fault scenarios (``faults.py``, ``faults-v1.jsonl``),
samples, scorer, and its bench (``bench.py``, ``lca bench freshness``). Nothing is imported here, so the bench
registry finds ``bench.py`` without loading inspect."""
