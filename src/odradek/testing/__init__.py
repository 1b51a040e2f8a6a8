"""Test helpers for users of Odradek: the pytest plugin with the ``odradek_broker`` fixture."""
