"""The runbooks Rebound ships, read by the runbook registry (REBOUND_RUNBOOK_MODULES names this module)."""

from jobs.runbooks.dead_letters import DISCARD, FIX_PARAMS, REPLAY, RESOLVE
from jobs.runbooks.housekeeping import PURGE, PURGE_MESSAGES, RECONCILE
from jobs.runbooks.scheduling import BACKFILL
from jobs.runbooks.waiting_runs import CANCEL, RETRY

RUNBOOKS = (REPLAY, DISCARD, RESOLVE, FIX_PARAMS, RETRY, CANCEL, BACKFILL, PURGE, PURGE_MESSAGES, RECONCILE)
