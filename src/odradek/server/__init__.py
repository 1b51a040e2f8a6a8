"""Odradek server layer (see docs/ARCHITECTURE.md)."""
