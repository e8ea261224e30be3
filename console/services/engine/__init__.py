"""The execution engine: submit, claim, execute, retry, dead-letter, replay, reconcile."""
