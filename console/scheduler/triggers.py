"""An APScheduler trigger that fires on Rebound's cron rules (DST included), offset by the task's jitter."""

from datetime import datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from console.domain.cron import CronSchedule


class TaskTrigger(BaseTrigger):
    """Fire at each cron time plus a fixed offset."""

    def __init__(self, schedule: CronSchedule, offset: timedelta):
        self.schedule = schedule
        self.offset = offset

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime:
        after = (previous_fire_time or now) - self.offset
        return self.schedule.next_after(after) + self.offset

    def nominal_time(self, fired_at: datetime, lookback: timedelta) -> datetime | None:
        """Return the cron time a firing at `fired_at` stands for (the latest one not after it, less the offset)."""
        target = fired_at - self.offset
        # Firings are nearly always on time: look one minute back first, the whole grace only if needed.
        for window in (min(lookback, timedelta(seconds=61)), lookback):
            latest = None
            for moment in self.schedule.fires_between(target - window, target):
                latest = moment
            if latest is not None:
                return latest
        return None

    def __str__(self) -> str:
        return f"cron[{self.schedule.expression} {self.schedule.timezone} +{self.offset.total_seconds():.1f}s]"
