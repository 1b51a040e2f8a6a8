"""Security fixtures: certificates made once per test session with the openssl command."""

from __future__ import annotations

import pytest

from odradek.testing.certificates import Certificates, make_certificates


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))
