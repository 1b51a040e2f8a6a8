"""KafkaPrincipal: who a connection is, as Kafka's authorizer, quotas and logs name it.

Every connection has one from the moment it serves requests: ``User:ANONYMOUS``
on a PLAINTEXT listener and on a TLS listener whose client sent no certificate,
the mapped certificate subject (``ssl.principal.mapping.rules``) on a TLS
listener whose client did. It lives on the ConnectionInfo so that everything
that later decides per principal (ACLs, quotas, SASL's re-authentication) finds
it where the request's connection is, without asking the network layer again.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's KafkaPrincipal.USER_TYPE: the only principal type its principal builders make.
USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        """Kafka's form, as ACLs and logs write it: ``User:alice``."""
        return f"{self.principal_type}:{self.name}"


#: Kafka's KafkaPrincipal.ANONYMOUS.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
