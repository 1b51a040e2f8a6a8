"""`odradek users list|add|delete`: users' SCRAM credentials, as kafka-configs.sh manages
them with ``--entity-type users --add-config 'SCRAM-SHA-256=[password=...]'``.

The calls are confluent-kafka's describe_user_scram_credentials and
alter_user_scram_credentials (DescribeUserScramCredentials and AlterUserScramCredentials):
the client salts and hashes the password (PBKDF2 with ``--iterations``, 4096 by default as
kafka-configs.sh), so only the salted password reaches the broker, which keeps the derived
keys, never the password. ``list`` prints each user with its mechanisms and iterations;
``delete`` removes one mechanism's credential, or all of a user's.
"""

from __future__ import annotations

import argparse
import getpass
from concurrent.futures import Future

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.cli.broker_calls import admin_client
from odradek.cli.client_options import add_connection_args
from odradek.cli.errors import ToolError

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
NAMES = {mechanism: name for name, mechanism in MECHANISMS.items()}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("users", help="list, add and delete users' SCRAM credentials")
    sub = parser.add_subparsers(dest="users_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="users with SCRAM credentials, and their mechanisms")
    p.add_argument("--user", action="append", default=[], help="only this user; repeatable")
    add_connection_args(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("add", help="add or replace a user's SCRAM credential")
    p.add_argument("--user", required=True, help="the user name")
    p.add_argument("--password", help="the password (asked for when not given)")
    p.add_argument(
        "--mechanism",
        choices=sorted(MECHANISMS),
        default="SCRAM-SHA-256",
        help="the SCRAM mechanism (default SCRAM-SHA-256)",
    )
    p.add_argument(
        "--iterations", type=int, default=4096, help="PBKDF2 iterations, 4096..16384 (default 4096)"
    )
    add_connection_args(p)
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("delete", help="delete a user's SCRAM credentials")
    p.add_argument("--user", required=True, help="the user name")
    p.add_argument(
        "--mechanism", choices=sorted(MECHANISMS), help="only this mechanism (default: all)"
    )
    add_connection_args(p)
    p.set_defaults(func=cmd_delete)


def _described(args: argparse.Namespace, users: list[str] | None) -> dict[str, list]:
    """User -> its credential infos; a named user without credentials is a ToolError."""
    admin, watch = admin_client(args)
    if users is None:
        every = admin.describe_user_scram_credentials()
        assert isinstance(every, Future)  # one future when no users are named
        found = watch.result(admin, every, "listing users")
        return {user: d.scram_credential_infos for user, d in found.items()}
    futures = admin.describe_user_scram_credentials(users)
    assert isinstance(futures, dict)  # a future per user named
    return {
        user: watch.result(admin, future, f"describing user {user}").scram_credential_infos
        for user, future in futures.items()
    }


def cmd_list(args: argparse.Namespace) -> int:
    for user, infos in sorted(_described(args, args.user or None).items()):
        credentials = ", ".join(
            f"{NAMES.get(i.mechanism, i.mechanism)} (iterations {i.iterations})" for i in infos
        )
        print(f"{user}: {credentials}")
    return 0


def _alter(args: argparse.Namespace, alterations: list, what: str) -> None:
    admin, watch = admin_client(args)
    for future in admin.alter_user_scram_credentials(alterations).values():
        watch.result(admin, future, what)


def cmd_add(args: argparse.Namespace) -> int:
    password = args.password
    if password is None:
        password = getpass.getpass(f"Password for {args.user}: ")
    if not password:
        raise ToolError("the password must not be empty")
    info = ScramCredentialInfo(MECHANISMS[args.mechanism], args.iterations)
    upsertion = UserScramCredentialUpsertion(args.user, info, password.encode())
    _alter(args, [upsertion], f"adding {args.mechanism} for user {args.user}")
    print(f"Added {args.mechanism} credential for user {args.user}.")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    if args.mechanism is not None:
        mechanisms = [args.mechanism]
    else:
        infos = _described(args, [args.user])[args.user]
        mechanisms = [NAMES[i.mechanism] for i in infos if i.mechanism in NAMES]
    deletions = [UserScramCredentialDeletion(args.user, MECHANISMS[m]) for m in mechanisms]
    _alter(args, deletions, f"deleting the credentials of user {args.user}")
    print(f"Deleted {', '.join(mechanisms)} credential of user {args.user}.")
    return 0
