from protocols.evals.continuity.continuity import continuity

__all__ = ["continuity"]
