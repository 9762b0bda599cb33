"""The parts of ``lca bench retrieval`` (``protocols/bench/retrieval_bench.py`` registers and runs it).

``config``: the retrievers, each dataset's ``RetrievalConfig`` file and grid variants; ``stores``: one real store
per haystack, built through the importers, and the rankings it returns; ``runners``: one run over a dataset file
through the dataset's retrieval adapter (its plug-in, ``protocols.evals.datasets``); ``report``: the result
records (``BenchmarkResult``) and their tables.
"""
