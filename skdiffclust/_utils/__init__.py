"""Shared plumbing: input validation (and, later, seeding and torch helpers)."""
