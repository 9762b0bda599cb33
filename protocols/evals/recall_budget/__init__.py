"""The recall-budget ablation: the task (``recall_budget.py``), samples, scorer, and its substrate-level bench
(``bench.py``, ``lca bench recall-budget``). Nothing is imported here, so the bench registry finds ``bench.py``
without loading inspect."""
