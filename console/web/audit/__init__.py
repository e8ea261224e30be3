"""Audit area."""
