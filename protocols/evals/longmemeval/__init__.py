"""LongMemEval (Wu et al. 2024, MIT): loaders, the official retrieval metrics, and the task."""
