"""Benchmarks run by ``lca bench``; each writes its run as one ``BenchmarkResult`` record
(``protocols.evals.benchmark``).

Each benchmark is a module here, or a protocol folder's ``bench.py``, exporting ``BENCHMARK = Benchmark(...)``
(see ``registry``); the command line builds one subcommand per name ``available_benchmarks()`` returns.
``protocols.evals.benchmark`` holds the declaration, the record and the one provenance builder; ``figures``
renders the documents' figures from the committed records (``lca figures``).

Listing the benchmarks imports every module here, and ``lca --help`` lists them: numpy, the substrate (faiss,
torch), inspect and the other heavy libraries are imported inside the functions that run a benchmark (a test
checks that the listing loads none of numpy, torch or faiss).
"""

from protocols.bench.registry import available_benchmarks, benchmark, discover
from protocols.evals.benchmark import Benchmark

__all__ = ["Benchmark", "available_benchmarks", "benchmark", "discover"]
