"""The audit trail: append-only, hash-chained, and read back page by page."""
