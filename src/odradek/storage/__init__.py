"""Odradek storage layer (see docs/ARCHITECTURE.md)."""
