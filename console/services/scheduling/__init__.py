"""Tasks and their firings: definitions, the planner, forecasts, SLA watch."""
