"""DLQ area: dead letters grouped by error, replayed and discarded."""
