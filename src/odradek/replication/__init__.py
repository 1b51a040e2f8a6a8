"""Partitions and the ReplicaManager (see docs/ARCHITECTURE.md)."""
