from protocols.evals.compaction.compaction import compaction

__all__ = ["compaction"]
