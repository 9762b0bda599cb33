"""Benchmarks run by ``lca bench``; each writes its measurements as JSON.

Each benchmark is a module here exporting ``BENCHMARK = Benchmark(...)`` (see ``registry``); the command line
builds one subcommand per name ``available_benchmarks()`` returns.
"""

from protocols.bench.registry import Benchmark, available_benchmarks, benchmark, discover

__all__ = ["Benchmark", "available_benchmarks", "benchmark", "discover"]
