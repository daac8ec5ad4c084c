"""Triton's config knowledge, below the stages and independent of recipes: the ModelConfig schema
(schema.py), config.pbtxt printed and parsed (config.py), 2.51's field sets (fields.py), core's
validation and ensemble rules ported (rules.py, ensemble_rules.py), the row a rule yields
(finding.py), stand-ins for core's own check (standin.py)."""
