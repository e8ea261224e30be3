"""Approvals area: the inbox of requests waiting for a second person, one's own requests, and each request's page."""
