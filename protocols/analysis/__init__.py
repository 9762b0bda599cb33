"""Analysis of study results: statistics (stats), rater agreement (agreement) and the rater panel (raters)."""
