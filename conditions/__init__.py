"""Experimental conditions (stateless, identity-only, summary, transcript-recall, full LCA, ...).

Imports ``lca`` only. The conditions themselves arrive with the harness issue.
"""
