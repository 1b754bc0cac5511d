"""Host certificates checked as OpenSSH checks them against `@cert-authority` lines
(PROTOCOL.certkeys; sshconnect.c check_host_cert): a host certificate, signed by a CA that
known_hosts trusts for the host's name, naming the host among its principals (or none), valid
now, with no critical option, and neither it nor its CA revoked."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import paramiko

from preflight.transport.ssh.knownhosts import KnownHosts

HOST_CERT = 2
# The public-key fields that follow the nonce, by certificate type (PROTOCOL.certkeys).
_KEY_FIELDS = {
    "ssh-ed25519-cert-v01@openssh.com": ("string",),
    "ssh-rsa-cert-v01@openssh.com": ("mpint", "mpint"),
    "rsa-sha2-256-cert-v01@openssh.com": ("mpint", "mpint"),
    "rsa-sha2-512-cert-v01@openssh.com": ("mpint", "mpint"),
    "ecdsa-sha2-nistp256-cert-v01@openssh.com": ("string", "string"),
    "ecdsa-sha2-nistp384-cert-v01@openssh.com": ("string", "string"),
    "ecdsa-sha2-nistp521-cert-v01@openssh.com": ("string", "string"),
}
CERT_TYPES = tuple(_KEY_FIELDS)


@dataclass(frozen=True)
class Cert:
    cert_type: str
    serial: int
    kind: int  # 1 user, 2 host
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical: bytes
    ca_blob: bytes
    signed: bytes  # what the CA signed: everything before the signature
    signature: bytes


def parse(blob: bytes) -> Cert:
    """Returns the certificate's fields; raises ValueError on anything malformed."""
    try:
        m = paramiko.Message(blob)
        cert_type = m.get_text()
        if cert_type not in _KEY_FIELDS:
            raise ValueError(f"unsupported certificate type {cert_type!r}")
        m.get_string()  # nonce
        for kind in _KEY_FIELDS[cert_type]:
            m.get_mpint() if kind == "mpint" else m.get_string()
        serial, cert_kind = m.get_int64(), m.get_int()
        key_id = m.get_string().decode("utf-8", "replace")
        packed = paramiko.Message(m.get_string())
        principals = []
        while packed.get_remainder():
            principals.append(packed.get_string().decode("utf-8", "replace"))
        valid_after, valid_before = m.get_int64(), m.get_int64()
        critical = m.get_string()
        m.get_string()  # extensions (none are defined for host certificates)
        m.get_string()  # reserved
        ca_blob = m.get_string()
        signed = m.get_so_far()
        signature = m.get_string()
    except (IndexError, ValueError, paramiko.SSHException, UnicodeDecodeError) as e:
        raise ValueError(f"malformed certificate: {e}") from None
    if not ca_blob or not signature:
        raise ValueError("malformed certificate: no CA key or signature")
    return Cert(cert_type, serial, cert_kind, key_id, tuple(principals), valid_after, valid_before,
                critical, ca_blob, signed, signature)


def verify(known: KnownHosts, names: Sequence[str], principal_names: Sequence[str],
           blob: bytes, plain_key: bytes, now: Optional[float] = None) -> Optional[str]:
    """Returns None when the certificate is acceptable for the host, else why not.
    names: the host's known_hosts names; principal_names: the names a principal may be."""
    try:
        cert = parse(blob)
    except ValueError as e:
        return str(e)
    if cert.kind != HOST_CERT:
        return "the certificate is not a host certificate"
    for r in known.for_names(names, "revoked"):
        if r.key in (cert.ca_blob, plain_key):
            return f"its {'CA' if r.key == cert.ca_blob else 'key'} is revoked ({r.where})"
    cas = [c for c in known.for_names(names, "cert-authority") if c.key == cert.ca_blob]
    if not cas:
        return "signed by a CA that no @cert-authority line trusts for this host"
    try:
        ca_type = paramiko.Message(cert.ca_blob).get_text()
        ca = paramiko.PKey.from_type_string(ca_type, cert.ca_blob)
        ok = ca.verify_ssh_sig(cert.signed, paramiko.Message(cert.signature))
    except (paramiko.SSHException, ValueError, IndexError, TypeError) as e:
        return f"its signature cannot be checked: {e}"
    if not ok:
        return "its CA signature does not verify"
    wanted = {n.lower() for n in principal_names}
    if cert.principals and not wanted & {p.lower() for p in cert.principals}:
        return (f"it names {', '.join(cert.principals)[:200]}, not "
                f"{', '.join(sorted(wanted))}")
    t = time.time() if now is None else now
    if not cert.valid_after <= t < cert.valid_before:
        return "it is not valid now (expired or not yet valid)"
    if cert.critical:
        return "it carries critical options, which host certificates may not"
    return None
