"""The runbooks Rebound ships, read by the runbook registry (REBOUND_RUNBOOK_MODULES names this module)."""

from jobs.runbooks.dead_letters import FIX_PARAMS, REPLAY, RESOLVE
from jobs.runbooks.housekeeping import PURGE, PURGE_MESSAGES, RECONCILE
from jobs.runbooks.scheduling import BACKFILL

RUNBOOKS = (REPLAY, RESOLVE, FIX_PARAMS, BACKFILL, PURGE, PURGE_MESSAGES, RECONCILE)
