"""Odradek metadata layer (see docs/ARCHITECTURE.md)."""
