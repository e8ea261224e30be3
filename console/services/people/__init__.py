"""Tenants, users, roles and API tokens."""
