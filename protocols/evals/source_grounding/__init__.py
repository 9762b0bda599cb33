from protocols.evals.source_grounding.source_grounding import source_grounding

__all__ = ["source_grounding"]
