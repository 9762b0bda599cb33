"""The insight protocol: the planted corpus (``corpus.py``, words in ``vocabulary.py``), the measures of one
integration cycle on it (``measure.py``), the task, its samples and scorer, and its bench (``bench.py``, ``lca bench
insight``). Nothing is imported here, so the bench registry finds ``bench.py`` without loading inspect."""
