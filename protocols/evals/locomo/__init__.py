"""LoCoMo (Maharana et al. 2024, CC BY-NC 4.0): the official QA F1 and evidence recall."""
