"""The probe's bootstrap for real: a host whose Python has this interpreter's bytecode magic
runs the bytecode the controller compiled; any other compiles the source that follows it."""

from __future__ import annotations

import importlib.util
import json
import marshal
import subprocess
import sys
import zlib

from preflight.collect.fanout import probe_payload
from preflight.hostside.ship import STDIN_BOOTSTRAP as BOOTSTRAP
from preflight.hostside.ship import pack


def bootstrap(payload: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-S", "-c", BOOTSTRAP, *args], input=payload,
                          capture_output=True, timeout=60)


def payload(magic: bytes, code: bytes, source: bytes) -> bytes:
    return pack(magic, code, source)


def test_the_same_magic_runs_the_shipped_bytecode_and_not_the_source():
    code = marshal.dumps(compile("print('bytecode', __name__)", "p", "exec"))
    p = bootstrap(payload(importlib.util.MAGIC_NUMBER, code, b"raise SystemExit(7)"))
    assert p.returncode == 0 and p.stdout == b"bytecode __main__\n", p


def test_another_magic_compiles_the_source_instead():
    p = bootstrap(payload(b"\x00\x00\r\n", b"not marshal data", b"print('source')"))
    assert p.returncode == 0 and p.stdout == b"source\n", p


def test_the_shipped_probe_runs_from_either_part():
    whole = zlib.decompress(probe_payload())
    for data in (whole, b"\x00\x00\r\n" + whole[4:]):  # bytecode; then the source
        data = zlib.compress(data)
        p = bootstrap(data, "--no-paddle", "--sample", "0.01")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["schema"] == 1
