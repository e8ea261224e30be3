"""Saga workflows: submitted as one unit (submit), moved on step by step or undone backward (advance), read (query)."""
