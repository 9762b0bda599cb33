"""The inspect-ai harness: scenario files, the condition solvers, the computed scorers."""
