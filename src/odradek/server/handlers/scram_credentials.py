"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51).

As Kafka 4 serves them (ScramImage.describe, ScramControlManager.alterCredentials):
credentials are stored per user and mechanism in the cluster metadata as salt,
StoredKey, ServerKey and iterations; the client sends a salted password, from which
the broker derives the two keys, so no password ever reaches the broker or its store.

Describe lists every user with a credential when no users are named; a named user
without one gets RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE. Alter takes
each user at most once per request, over deletions and upsertions together (a second
mention is DUPLICATE_RESOURCE for that user); an empty name is UNACCEPTABLE_CREDENTIAL,
an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384
UNACCEPTABLE_CREDENTIAL, deleting a credential that is not there RESOURCE_NOT_FOUND.
Each user's change is written as one update of that user's credentials.

Describing needs DESCRIBE on the cluster, altering ALTER; refused, the request gets
CLUSTER_AUTHORIZATION_FAILED (every user's result carries it), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from odradek.network.scram import (
    SCRAM_BY_TYPE,
    InvalidCredential,
    ScramCredential,
    ScramMechanism,
)
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import AclOperation, authorize_cluster, denied
from odradek.server.context import RequestContext

_DUPLICATE = "A user credential cannot be altered twice in the same request"


async def handle_describe_user_scram_credentials(ctx: RequestContext, request) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    module = schemas.response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version)
    stored = ctx.broker.metadata.scram_credentials()
    if request.users:
        named = [u.name for u in request.users]
        users = list(dict.fromkeys(named))
        duplicates = {u for u in users if named.count(u) > 1}
    else:
        users, duplicates = sorted(stored), set()
    results = []
    for user in users:
        error, message = ErrorCode.none, None
        infos: list[Any] = []
        if user in duplicates:
            error = ErrorCode.duplicate_resource
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
        elif not stored.get(user):
            error = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {user}"
        else:
            for mechanism in SCRAM_BY_TYPE.values():
                text = stored[user].get(mechanism.name)
                if text is None:
                    continue
                try:
                    iterations = ScramCredential.from_text(text).iterations
                except InvalidCredential as e:
                    error, message, infos = ErrorCode.unknown_server_error, str(e), []
                    break
                infos.append(
                    schemas.build(
                        module.CredentialInfo, mechanism=mechanism.type, iterations=iterations
                    )
                )
        results.append(
            schemas.build(
                module.DescribeUserScramCredentialsResult,
                user=user,
                error_code=error,
                error_message=message,
                credential_infos=tuple(infos),
            )
        )
    return schemas.build(
        module.DescribeUserScramCredentialsResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in SCRAM_BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _alterations(request, stored: dict[str, dict[str, str]]):
    """(user -> (mechanism name, new credential text, or None to delete), user -> error):
    Kafka's ScramControlManager checks, each user at most once per request."""
    errors: dict[str, tuple[ErrorCode, str]] = {}
    changes: dict[str, tuple[str, str | None]] = {}
    items = [(d, False) for d in request.deletions] + [(u, True) for u in request.upsertions]
    for item, upsert in items:
        name = item.name
        if name in errors:
            continue
        if changes.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, _DUPLICATE)
            continue
        problem = _check_name_and_mechanism(name, item.mechanism)
        if problem is None:
            mechanism = SCRAM_BY_TYPE[item.mechanism]
            problem, change = _alteration(item, upsert, mechanism, stored.get(name, {}))
            if change is not None:
                changes[name] = change
        if problem is not None:
            errors[name] = problem
    return changes, errors


def _alteration(item, upsert: bool, mechanism: ScramMechanism, held: dict[str, str]):
    """(an error, None) or (None, the change) for one deletion or upsertion."""
    if not upsert:
        if mechanism.name not in held:
            problem = "Attempt to delete a user credential that does not exist"
            return (ErrorCode.resource_not_found, problem), None
        return None, (mechanism.name, None)
    if item.iterations < mechanism.min_iterations:
        return (ErrorCode.unacceptable_credential, "Too few iterations"), None
    if item.iterations > mechanism.max_iterations:
        return (ErrorCode.unacceptable_credential, "Too many iterations"), None
    credential = mechanism.credential(
        bytes(item.salted_password), bytes(item.salt), item.iterations
    )
    return None, (mechanism.name, credential.to_text())


async def handle_alter_user_scram_credentials(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version)
    metadata = ctx.broker.metadata
    results = []
    if not authorize_cluster(ctx, AclOperation.ALTER):
        # Kafka's getErrorResponse: each user named, once, with the error.
        users = dict.fromkeys(a.name for a in (*request.deletions, *request.upsertions))
        results = [(name, ErrorCode.cluster_authorization_failed, None) for name in users]
        changes, errors = {}, {}
    else:
        changes, errors = _alterations(request, metadata.scram_credentials())
    stored = metadata.scram_credentials()
    for name, (mechanism_name, text) in changes.items():
        credentials = dict(stored.get(name, {}))
        if text is None:
            credentials.pop(mechanism_name, None)
        else:
            credentials[mechanism_name] = text
        metadata.set_scram_credentials(name, credentials)
        results.append((name, ErrorCode.none, None))
    results.extend((name, code, message) for name, (code, message) in errors.items())
    return schemas.build(
        module.AlterUserScramCredentialsResponse,
        throttle_time=0,
        results=tuple(
            schemas.build(
                module.AlterUserScramCredentialsResult,
                user=name,
                error_code=code,
                error_message=message,
            )
            for name, code, message in results
        ),
    )
