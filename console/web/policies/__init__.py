"""The Policies area: retry policies, their backoff preview and their version history."""
