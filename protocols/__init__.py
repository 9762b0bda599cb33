"""Experiments as inspect-ai tasks, benchmarks, reports and the ``lca`` command line."""
