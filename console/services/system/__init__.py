"""The running system: queues and workers, metrics, health, set-up and demo data, the maintenance schedule."""
