"""Deliver alerts and work orders from the outbox to Slack, PagerDuty, the alert webhook and the work-order system.

Rows are written by the change that causes them (`outbox.add`, `outbox.resolve`); the maintenance job
`system.delivery_round.tick` (every 2 s, id "outbox") closes work orders whose dead letters are all settled,
then delivers whatever is due. One module per channel builds the exact request; `dispatch` claims, sends and
retries; `manual` is what an admin does by hand.
"""
