"""Reports: the same judgement rendered for a terminal or as a JSON document."""
