from protocols.evals.correction.correction import correction

__all__ = ["correction"]
