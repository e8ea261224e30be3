"""The Queues area: RQ queues, workers and the scheduler leader."""
