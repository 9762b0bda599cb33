"""Benchmarks run by ``lca bench``; each writes its run as one ``BenchmarkResult`` record (``result``).

Each benchmark is a module here exporting ``BENCHMARK = Benchmark(...)`` (see ``registry``); the command line
builds one subcommand per name ``available_benchmarks()`` returns. ``result`` holds the record and the one
provenance builder; ``figures`` renders the documents' figures from the committed records (``lca figures``).
"""

from protocols.bench.registry import Benchmark, available_benchmarks, benchmark, discover

__all__ = ["Benchmark", "available_benchmarks", "benchmark", "discover"]
