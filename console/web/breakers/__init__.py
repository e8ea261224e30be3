"""The Breakers area: circuit breakers per handler, and resetting one."""
