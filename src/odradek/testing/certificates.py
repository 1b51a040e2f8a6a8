"""Certificates for tests and benchmarks, made with the openssl command: a CA, brokers, clients.

The broker's certificate names 127.0.0.1 and localhost in subjectAltName, so clients that
verify the host name (all three client libraries do by default) accept it. EC keys, which
openssl makes in milliseconds. The client's subject is the example of Kafka's
ssl.principal.mapping.rules documentation, so the documented rule and result can be used.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The subject of the client certificate, written as openssl -subj takes it (first RDN first).
CLIENT_SUBJECT = "/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke"
#: The same subject as Kafka (Java's X500Principal.getName()) writes it.
CLIENT_SUBJECT_RFC2253 = "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"
KEY_PASSWORD = "key-secret"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate (PEM), the trust store of both sides
    broker: Path  # the broker's private key and certificate in one PEM file
    broker_cert: Path
    broker_key: Path
    broker_key_encrypted: Path  # the broker key as encrypted PKCS#8, password KEY_PASSWORD
    broker_encrypted: Path  # that key and the certificate in one PEM file
    #: Another broker key store (key and certificate, subject CN=rotated) from the same CA.
    rotated: Path
    client_cert: Path
    client_key: Path
    #: A client certificate signed by a CA the broker does not trust.
    stranger_cert: Path
    stranger_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key(name: str, cwd: Path) -> None:
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name, cwd=cwd
    )


def _signed(name: str, subject: str, ca: str, cwd: Path, extensions: str | None = None) -> None:
    _key(f"{name}.key", cwd)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=cwd)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key"]
    args += ["-CAcreateserial", "-days", "2", "-out", f"{name}.pem"]
    if extensions is not None:
        (cwd / f"{name}.ext").write_text(extensions)
        args += ["-extfile", f"{name}.ext"]
    _openssl(*args, cwd=cwd)


def _ca(name: str, subject: str, cwd: Path) -> None:
    _key(f"{name}.key", cwd)
    _openssl(
        "req", "-x509", "-new", "-key", f"{name}.key", "-subj", subject, "-days", "2",
        "-out", f"{name}.pem", cwd=cwd,
    )  # fmt: skip


def make_certificates(directory: Path) -> Certificates:
    _ca("ca", "/CN=Odradek Test CA", directory)
    _ca("other-ca", "/CN=Some Other CA", directory)
    _signed(
        "broker",
        "/O=Odradek/OU=Brokers/CN=localhost",
        "ca",
        directory,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    _signed(
        "rotated",
        "/O=Odradek/OU=Brokers/CN=rotated",
        "ca",
        directory,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    _signed("client", CLIENT_SUBJECT, "ca", directory)
    _signed("stranger", "/CN=stranger", "other-ca", directory)
    combined = directory / "broker-keystore.pem"
    combined.write_text(
        (directory / "broker.key").read_text() + (directory / "broker.pem").read_text()
    )
    _openssl(
        "pkcs8", "-topk8", "-in", "broker.key", "-v2", "aes-256-cbc",
        "-passout", f"pass:{KEY_PASSWORD}", "-out", "broker-encrypted.key", cwd=directory,
    )  # fmt: skip
    rotated = directory / "rotated-keystore.pem"
    rotated.write_text(
        (directory / "rotated.key").read_text() + (directory / "rotated.pem").read_text()
    )
    encrypted = directory / "broker-keystore-encrypted.pem"
    encrypted.write_text(
        (directory / "broker-encrypted.key").read_text() + (directory / "broker.pem").read_text()
    )
    return Certificates(
        ca=directory / "ca.pem",
        broker=combined,
        broker_cert=directory / "broker.pem",
        broker_key=directory / "broker.key",
        broker_key_encrypted=directory / "broker-encrypted.key",
        broker_encrypted=encrypted,
        rotated=rotated,
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        stranger_cert=directory / "stranger.pem",
        stranger_key=directory / "stranger.key",
    )
