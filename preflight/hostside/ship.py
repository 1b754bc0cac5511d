"""What runs on the hosts, as it travels there. Each program shipped (the probe, the watch's
sampler, the Paddle jobs' scripts) is this package's parts joined into one self-contained
text; the parts stay plain modules, linted and importable by the tests, whose lines marked
"# joined" find the other parts as modules and are left out of the text. A text travels one
of three ways, each packed here:

- on the stdin of one round trip (the probe): `stdin_payload`, read by `STDIN_BOOTSTRAP`;
- in the command line of a long-lived channel (the sampler): `command_line`;
- as a file written into a run directory (a Paddle job's script): `file_writer`;
- as the text of `python -c`, for the short helpers of a run (the master's port, the port
  reach's listener and connector, the reaper of a run's processes): `inline`.

Nothing is written on a host but the last, where Paddle's launcher needs a file to run.
This module itself is not shipped."""

from __future__ import annotations

import ast
import base64
import functools
import importlib.util
import marshal
import re
import threading
import zlib
from importlib import resources

JOINED = "# joined"  # ends the lines of a part that only the package form needs
MAIN_GUARD = 'if __name__ == "__main__":'
# `from preflight.hostside.PART import NAME [as NAME], ...  # joined`: a part this one needs.
JOINED_IMPORT = re.compile(r"^from preflight\.hostside\.(\w+) import (.+?)\s*# joined$")


def part(name: str) -> str:
    """The source of one part (hostside/<name>.py), as the package holds it."""
    return resources.files("preflight.hostside").joinpath(f"{name}.py").read_text()


def without_joined_lines(source: str) -> str:
    return "".join(line for line in source.splitlines(keepends=True)
                   if not line.rstrip().endswith(JOINED))


def joined_imports(source: str) -> list[tuple[str, list[str]]]:
    """(part, names) of each line of source marked "# joined", in order."""
    out = []
    for line in source.splitlines():
        m = JOINED_IMPORT.match(line.strip())
        if m:
            names = []
            for item in m.group(2).split(","):
                name, _, alias = (x.strip() for x in item.partition(" as "))
                if alias and alias != name:
                    # Joined, the part's name is the one defined: an alias would name nothing.
                    raise RuntimeError(f"hostside: {line.strip()}: a joined name keeps its name")
                names.append(name)
            out.append((m.group(1), names))
    return out


def parts_of(name: str) -> list[str]:
    """The parts program name joins, those each needs before it, name last: read off the
    lines marked "# joined" of each, so that a part's needs are said once, where it imports
    them. ship's own are the sources passed on as text, not a part."""
    order: list[str] = []

    def visit(p: str, path: tuple[str, ...]) -> None:
        if p in order:
            return
        if p in path:
            raise RuntimeError(f"hostside/{p}.py: parts join in a cycle: {' -> '.join(path)}")
        for dep, _ in joined_imports(part(p)):
            if dep != "ship":
                visit(dep, (*path, p))
        order.append(p)
    visit(name, ())
    return order


def defined_names(source: str) -> set[str]:
    """The names a part defines at its top level (functions, classes, assignments)."""
    out: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def join(name: str) -> str:
    """Program name as one text: the sources passed on as text (what its parts import from
    ship), then every part it joins, each without its joined lines, theirs first, then its
    own body and entry point. Two parts that define one name would silently take each
    other's in one text: refused."""
    parts = parts_of(name)
    passed: list[str] = []
    where: dict[str, str] = {}
    for p in parts:
        for dep, names in joined_imports(part(p)):
            if dep == "ship":
                passed += [n for n in names if n not in passed]
        for n in defined_names(without_joined_lines(part(p))):
            if n in where:
                raise RuntimeError(f"hostside: {n} is defined in both {where[n]}.py and "
                                   f"{p}.py, which {name} joins into one text")
            where[n] = p
    for p in parts:
        for dep, names in joined_imports(part(p)):
            missing = [n for n in names if dep != "ship" and where.get(n) != dep]
            if missing:
                raise RuntimeError(f"hostside/{p}.py imports {missing[0]} from {dep}.py, "
                                   "which does not define it: joined, it would be undefined")
    body, entry = _entry(name)
    head = "".join(f"{n} = {globals()[n]!r}\n" for n in passed)
    joined = "\n\n".join(without_joined_lines(part(p)) for p in parts[:-1])
    return f"{head}\n\n{joined}\n\n{body}{entry}"


def _entry(name: str) -> tuple[str, str]:
    """A program's main part without its joined lines, split before its entry point."""
    body, guard, entry = without_joined_lines(part(name)).rpartition(MAIN_GUARD)
    if not guard:
        raise RuntimeError(f"hostside/{name}.py lost its {MAIN_GUARD!r} line")
    return body, guard + entry


# The sources the probe passes on: NVML's (to the Paddle child) and the child's own.
NVML_SRC = part("nvml")
PADDLE_CHILD = part("paddle_child")


# One join at a time, and each program joined once: the hosts' threads ask for a program's
# text at once on first use. CPython's ast.parse is not safe in threads at once
# (python/cpython#106905: a spurious "SystemError: AST constructor recursion depth mismatch",
# seen in a check's upload), and a join per thread, one after another, held 32 hosts' probes
# back by seconds each (their clocks could not be judged).
_JOINING = threading.Lock()
_JOINED: dict[str, str] = {}


def _program(name: str) -> str:
    with _JOINING:
        text = _JOINED.get(name)
        if text is None:
            text = _JOINED[name] = join(name)
        return text


def probe() -> str:
    """The probe: probe.py and the parts it joins (its fact families and what they share)."""
    return _program("probe")


def sampler() -> str:
    """The watch's sampler: sampler.py and the parts it joins."""
    return _program("sampler")


def script(name: str) -> str:
    """A Paddle job's script (allreduce, ps_round): one part, whole."""
    return part(name)


def inline(python: str, name: str, *args: str) -> list[str]:
    """The argv that runs a short helper (one part, whole: reap, master_free, port_listener,
    port_connector) with python, its arguments after: readable in `ps` as what it is, and
    nothing to unpack."""
    return [python, "-c", part(name), *args]


# ---------------------------------------------------------------- on stdin
# The payload arrives on stdin and runs from memory: nothing is written on the host, so a
# full or read-only /tmp cannot stop it. The magic is read where every CPython keeps it
# loaded (3.6 onwards), at no import cost.
STDIN_BOOTSTRAP = (
    'import sys,marshal,zlib;d=zlib.decompress(sys.stdin.buffer.read());n=int(d[4:12]);'
    'm=getattr(sys.modules.get("_frozen_importlib_external"),"MAGIC_NUMBER",b"");'
    'exec(marshal.loads(d[12:12+n]) if d[:4]==m else compile(d[12+n:],"preflight-probe",'
    '"exec"))')


_PACKING = threading.Lock()
_PACKED: dict[str, bytes] = {}


def stdin_payload(text: str) -> bytes:
    """What travels on stdin for STDIN_BOOTSTRAP: this interpreter's bytecode magic, the text
    compiled here (marshal), then its source. A host whose Python has the same magic runs the
    bytecode, sparing the compile that was over a quarter of the probe's CPU (4.5 ms of 16
    per host, measured); any other compiles the source. Compiled once, whatever number of
    hosts' threads ask at once."""
    with _PACKING:
        payload = _PACKED.get(text)
        if payload is None:
            source = text.encode()
            code = marshal.dumps(compile(source, "preflight-probe", "exec", dont_inherit=True))
            payload = _PACKED[text] = pack(importlib.util.MAGIC_NUMBER, code, source)
        return payload


def pack(magic: bytes, code: bytes, source: bytes) -> bytes:
    """The payload STDIN_BOOTSTRAP unpacks, deflated: 60 KB instead of 154 for the probe on
    the wire of every host (sshd decrypts and pipes less; zlib is built into CPython wherever
    it has it)."""
    return zlib.compress(magic + b"%08d" % len(code) + code + source, 6)


# ---------------------------------------------------------------- in a command line
ARGV_BOOTSTRAP = ("import base64,sys,zlib;exec(compile(zlib.decompress(base64.b64decode("
                  "sys.argv.pop(1))),'preflight-sampler','exec'))")


@functools.lru_cache(maxsize=4)
def packed(text: str) -> str:
    """A text compressed and base64-encoded: one shell word."""
    return base64.b64encode(zlib.compress(text.encode(), 9)).decode()


def command_line(python: str, text: str, *args: str) -> list[str]:
    """The argv that runs text from the command line with python, its own arguments after:
    -S (the standard library is all it needs), -u (each line it prints leaves at once)."""
    return [python, "-S", "-u", "-c", ARGV_BOOTSTRAP, packed(text), *args]


# ---------------------------------------------------------------- as a file
FILE_WRITER = ("import base64,sys,zlib;open(sys.argv[1],'wb').write("
               "zlib.decompress(base64.b64decode(sys.argv[2])))")


def file_writer(python: str, path: str, text: str) -> list[str]:
    """The argv that writes text to path on the host with python."""
    return [python, "-c", FILE_WRITER, path, packed(text)]
