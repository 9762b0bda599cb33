from protocols.evals.hollow_copy.hollow_copy import hollow_copy

__all__ = ["hollow_copy"]
