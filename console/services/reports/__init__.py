"""Figures for people who read rather than act: the Overview's numbers."""
