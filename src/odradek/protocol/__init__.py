"""Odradek protocol layer (see docs/ARCHITECTURE.md)."""
