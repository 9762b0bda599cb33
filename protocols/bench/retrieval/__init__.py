"""The parts of ``lca bench retrieval`` (``protocols/bench/retrieval_bench.py`` registers and runs it).

``config``: ``HybridConfig``, the per-dataset defaults and the ablation variants; ``ranking``: the rankers over a
list of unit texts; ``resonance``: full recall over a real substrate; ``units``: LoCoMo's retrieval units;
``runners``: one run over a LongMemEval or LoCoMo file; ``report``: the tables and the written report.
"""
