"""Odradek coordinator layer (see docs/ARCHITECTURE.md)."""
