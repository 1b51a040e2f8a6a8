"""Certificate subjects as Java's X500Principal.getName() writes them (what Kafka's rules see).

Certificates are made with the openssl command; the expected strings are Java's RFC 2253
form (keywords for the RFC 2253 attribute types, others as OID=#DER hex, ``=`` and ``#``
escaped as Java escapes them).
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from odradek.network.distinguished_name import MalformedCertificate, subject_rfc2253


def certificate(tmp_path: Path, subject: str, *extra: str) -> bytes:
    key, pem = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        + ["-nodes", "-keyout", str(key), "-out", str(pem), "-days", "1", "-subj", subject]
        + list(extra),
        check=True,
        capture_output=True,
    )
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke", "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"),
        ("/DC=com/DC=example/UID=u1/CN=user", "CN=user,UID=u1,DC=example,DC=com"),
        ("/CN=Tkac, Adam/O=a\\=b#c;d\\+e", "O=a\\=b\\#c\\;d\\+e,CN=Tkac\\, Adam"),
        ("/CN=x/emailAddress=a@b.c", "1.2.840.113549.1.9.1=#1605614062" + b".c".hex() + ",CN=x"),
        ("/O=Org/CN=a+UID=b", "CN=a+UID=b,O=Org"),
        ("/CN=Zoë", "CN=Zoë"),
    ],
)
def test_subjects_as_java_writes_them(tmp_path: Path, subject: str, expected: str) -> None:
    extra = ("-multivalue-rdn",) if "UID=b" in subject else ()
    assert subject_rfc2253(certificate(tmp_path, subject, "-utf8", *extra)) == expected


def test_openssl_agrees_on_plain_subjects(tmp_path: Path) -> None:
    der = certificate(tmp_path, "/C=DE/O=Odradek/OU=Brokers/CN=broker-1")
    printed = subprocess.run(
        ["openssl", "x509", "-inform", "DER", "-noout", "-subject", "-nameopt", "RFC2253"],
        input=der,
        check=True,
        capture_output=True,
    ).stdout.decode()
    assert printed.strip() == "subject=" + subject_rfc2253(der)


@pytest.mark.parametrize("der", [b"", b"\x30\x82\x01", b"\x30\x03\x02\x01\x01", b"\x04\x00"])
def test_garbage_is_an_error(der: bytes) -> None:
    with pytest.raises(MalformedCertificate):
        subject_rfc2253(der)
