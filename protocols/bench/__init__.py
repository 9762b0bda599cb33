"""Benchmarks run by ``lca bench``; each writes its measurements as JSON."""
