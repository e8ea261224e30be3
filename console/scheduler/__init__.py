"""The scheduler process: cron triggers, maintenance schedule, leader lock."""
