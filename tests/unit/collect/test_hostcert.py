"""Host certificates made by ssh-keygen, judged as OpenSSH judges them against
@cert-authority lines: right CA, host certificate, principal, validity, revocation."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from preflight.transport.ssh import hostcert
from preflight.transport.ssh import knownhosts as K

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="needs ssh-keygen (openssh-client)")


def keygen(tmp_path, name: str, kind: str = "ed25519") -> str:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    return str(path)


def sign(ca: str, key: str, *opts: str) -> bytes:
    subprocess.run(["ssh-keygen", "-q", "-s", ca, "-I", "test", *opts, key + ".pub"],
                   check=True, capture_output=True)
    return base64.b64decode(open(key + "-cert.pub").read().split()[1])


def pub(path: str) -> tuple[str, str]:
    kind, b64 = open(path + ".pub").read().split()[:2]
    return kind, b64


def known(tmp_path, *lines: str) -> K.KnownHosts:
    p = tmp_path / "known_hosts"
    p.write_text("".join(line + "\n" for line in lines))
    return K.load([str(p)])


@pytest.fixture
def setup(tmp_path):
    ca = keygen(tmp_path, "ca")
    host = keygen(tmp_path, "host")
    kind, b64 = pub(ca)
    return tmp_path, ca, host, f"@cert-authority *.cluster {kind} {b64}"


def plain(host: str) -> bytes:
    return base64.b64decode(pub(host)[1])


def test_a_host_certificate_from_the_trusted_ca_is_accepted(setup):
    tmp_path, ca, host, line = setup
    cert = sign(ca, host, "-h", "-n", "n1.cluster,n1")
    kh = known(tmp_path, line)
    assert hostcert.verify(kh, ["n1.cluster"], ["n1.cluster", "n1"], cert, plain(host)) is None
    parsed = hostcert.parse(cert)
    assert parsed.principals == ("n1.cluster", "n1") and parsed.kind == hostcert.HOST_CERT


@pytest.mark.parametrize("rsa", [False, True], ids=["ed25519-ca", "rsa-ca"])
def test_ca_key_types(tmp_path, rsa):
    ca = keygen(tmp_path, "ca", "rsa" if rsa else "ed25519")
    host = keygen(tmp_path, "host", "ecdsa")
    kind, b64 = pub(ca)
    cert = sign(ca, host, "-h", "-n", "n1.cluster")
    kh = known(tmp_path, f"@cert-authority n1.cluster {kind} {b64}")
    assert hostcert.verify(kh, ["n1.cluster"], ["n1.cluster"], cert, plain(host)) is None


def test_what_openssh_refuses_is_refused(setup):
    tmp_path, ca, host, line = setup
    other_ca = keygen(tmp_path, "other_ca")
    kh = known(tmp_path, line)
    cases = {
        "user certificate": (sign(ca, host, "-n", "n1.cluster"), "not a host certificate"),
        "wrong principal": (sign(ca, host, "-h", "-n", "n2.cluster"), "not n1.cluster"),
        "expired": (sign(ca, host, "-h", "-n", "n1.cluster", "-V", "20200101:20200102"),
                    "not valid now"),
        "untrusted CA": (sign(other_ca, host, "-h", "-n", "n1.cluster"), "no @cert-authority"),
    }
    for what, (cert, why) in cases.items():
        got = hostcert.verify(kh, ["n1.cluster"], ["n1.cluster"], cert, plain(host))
        assert got is not None and why in got, (what, got)
    # The CA trusted for *.cluster only: another domain's name is not covered.
    good = sign(ca, host, "-h", "-n", "n1.other")
    assert "no @cert-authority" in str(hostcert.verify(kh, ["n1.other"], ["n1.other"], good,
                                                       plain(host)))


def test_a_revoked_ca_or_host_key_is_refused(setup):
    tmp_path, ca, host, line = setup
    cert = sign(ca, host, "-h", "-n", "n1.cluster")
    kind, b64 = pub(ca)
    kh = known(tmp_path, line, f"@revoked * {kind} {b64}")
    assert "CA is revoked" in str(hostcert.verify(kh, ["n1.cluster"], ["n1.cluster"], cert,
                                                  plain(host)))
    hk, hb = pub(host)
    kh = known(tmp_path, line, f"@revoked * {hk} {hb}")
    assert "key is revoked" in str(hostcert.verify(kh, ["n1.cluster"], ["n1.cluster"], cert,
                                                   plain(host)))


def test_a_tampered_certificate_fails_its_signature(setup):
    tmp_path, ca, host, line = setup
    cert = bytearray(sign(ca, host, "-h", "-n", "n1.cluster"))
    cert[60] ^= 0xFF  # inside the nonce or key: signed bytes
    got = hostcert.verify(known(tmp_path, line), ["n1.cluster"], ["n1.cluster"], bytes(cert),
                          plain(host))
    assert got is not None and ("signature" in got or "malformed" in got)


def test_garbage_is_malformed_not_a_crash():
    with pytest.raises(ValueError, match="malformed|unsupported"):
        hostcert.parse(b"\x00\x00\x00\x03abc")
