from protocols.evals.freshness.freshness import freshness

__all__ = ["freshness"]
