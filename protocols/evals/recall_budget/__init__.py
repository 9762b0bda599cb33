from protocols.evals.recall_budget.recall_budget import recall_budget

__all__ = ["recall_budget"]
