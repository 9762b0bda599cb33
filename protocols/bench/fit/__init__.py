"""``lca fit``: ranking weights fitted with scikit-learn from labelled questions, scored on held-out folds by the
product's own ranking, and written only when they beat the defaults there (``model``: the fit and the folds;
``retrieval``: the retrieval bench's stores read for features and rankings; ``record``: the YAML written)."""
