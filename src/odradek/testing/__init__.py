"""Odradek testing layer (see docs/ARCHITECTURE.md)."""
