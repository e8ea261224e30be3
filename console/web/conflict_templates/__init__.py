"""Conflict templates: named planner rules tasks reference (under Tasks)."""
