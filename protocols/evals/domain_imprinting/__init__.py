from protocols.evals.domain_imprinting.domain_imprinting import domain_imprinting

__all__ = ["domain_imprinting"]
