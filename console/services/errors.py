"""Errors services raise for bad input; the API and views turn them into 4xx answers."""


class ServiceError(Exception):
    """A request that cannot be carried out; says what to fix."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str, field: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.field = field

    def to_dict(self) -> dict:
        body = {"error": self.code, "detail": self.detail}
        if self.field:
            body["field"] = self.field
        return body


class InvalidInput(ServiceError):
    status = 422
    code = "invalid"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class QueueFull(ServiceError):
    """A submission over a queue limit or tenant quota; nothing was created."""

    status = 429
    code = "queue_full"
    # A hint, sent as Retry-After: the queue drains as workers finish runs, at a pace nobody knows in advance.
    retry_after_s = 10

    def __init__(self, detail: str, limit: str, current: int, maximum: int):
        super().__init__(detail, limit)
        self.limit, self.current, self.maximum = limit, current, maximum

    def to_dict(self) -> dict:
        return {**super().to_dict(), "limit": self.limit, "current": self.current, "max": self.maximum}


class StaleVersion(Conflict):
    """A save based on an older version than the one in force (someone saved meanwhile); nothing was written."""

    code = "stale_version"

    def __init__(self, saved_by: str, current: int, base: int):
        self.summary = f"{saved_by} saved version {current} while you edited version {base}"
        super().__init__(f"{self.summary}; nothing was saved: read version {current}, then send your change again "
                         f"with base_version {current} to replace it", "base_version")
        self.saved_by, self.current, self.base = saved_by, current, base

    def to_dict(self) -> dict:
        return {**super().to_dict(), "current_version": self.current, "saved_by": self.saved_by}
