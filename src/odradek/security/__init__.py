"""Authorization as Kafka's StandardAuthorizer: ACL bindings and the decision over them.

A package of its own at the bottom of the layers, importing nothing of ours: the metadata
stores persist ACL bindings (metadata sits beside storage and may not see the server), the
server's handlers ask for decisions, and the CLI names the same types. Putting the core
under ``server/`` would have forced the stores to reach up for the types they keep.
"""
