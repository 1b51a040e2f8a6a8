"""Listeners and connections: framing, in-order responses, limits (see docs/ARCHITECTURE.md)."""
