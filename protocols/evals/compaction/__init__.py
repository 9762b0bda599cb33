"""Compaction: the task (``compaction.py``), samples, scorer, and its substrate-level bench (``bench.py``,
``lca bench compaction``). Nothing is imported here, so the bench registry finds ``bench.py`` without loading
inspect."""
