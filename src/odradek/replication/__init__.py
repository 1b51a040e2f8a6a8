"""Odradek replication layer (see docs/ARCHITECTURE.md)."""
