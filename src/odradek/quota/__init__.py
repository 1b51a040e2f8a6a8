"""Client quotas as Kafka's quota managers keep them, sans-I/O.

``entity`` names who a quota is for (a user, a client id, both, or their defaults) and
resolves a connection's quota by Kafka's eight-level precedence; ``rate`` is Kafka's
windowed ``Rate`` and ``TokenBucket`` with the throttle times its QuotaUtils derives from a
violation; ``manager`` records what each (user, client id) does against its quota and says
how long to throttle. Nothing here reads a clock, a socket or a store: the server hands in
the time, the measured values and the configured quotas. Imports nothing of ours.
"""
