"""Benchmarks run by ``lca bench``; each writes its run as one ``BenchmarkResult`` record
(``protocols.evals.benchmark``).

Each benchmark is a module here, or a protocol folder's ``bench.py``, exporting ``BENCHMARK = Benchmark(...)``
(see ``registry``); the command line builds one subcommand per name ``available_benchmarks()`` returns.
``protocols.evals.benchmark`` holds the declaration, the record and the one provenance builder; ``figures``
renders the documents' figures from the committed records (``lca figures``).
"""

from protocols.bench.registry import available_benchmarks, benchmark, discover
from protocols.evals.benchmark import Benchmark

__all__ = ["Benchmark", "available_benchmarks", "benchmark", "discover"]
