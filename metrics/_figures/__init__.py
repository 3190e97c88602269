"""Figures, animations, reports and the ds.attn accessor."""
