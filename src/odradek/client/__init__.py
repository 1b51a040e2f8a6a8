"""Odradek client layer (see docs/ARCHITECTURE.md)."""
