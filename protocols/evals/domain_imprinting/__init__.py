"""Domain imprinting: the task (``domain_imprinting.py``), its longitudinal scenario generator (``scenarios.py``),
samples, scorer, and its substrate-level bench (``bench.py``, ``lca bench imprinting``) with its figures
(``figures.py``). Nothing is imported here, so the bench registry finds ``bench.py`` without loading inspect."""
