"""The shape the design relies on: data flows one way between the stages (an allow-list,
checked transitively), no import cycle, checks are pure and named for what they check, the
shipped scripts are self-contained, imports are namespaced."""

from __future__ import annotations

import ast
import pathlib
import sys
from collections.abc import Iterator

import pytest

from preflight.hostside import ship

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOSTSIDE = ROOT / "preflight" / "hostside"
# Everything shipped to a host: every module of hostside/ but ship (which packs them).
SHIPPED_PARTS = sorted(p for p in HOSTSIDE.glob("*.py") if p.stem not in ("ship", "__init__"))
# Where each installed package lives in the repository (see pyproject's package-dir).
SOURCES = {"preflight": ROOT / "preflight", "preflight.checks": ROOT / "checks",
           "preflight.inventory": ROOT / "inventory"}


def imports(path: pathlib.Path | str) -> set[str]:
    """Returns every module path.py (or a source text) imports, at any depth (also inside
    functions)."""
    tree = ast.parse(path.read_text() if isinstance(path, pathlib.Path) else path)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)  # `from pkg import mod`
    return out


def project_modules() -> dict[str, pathlib.Path]:
    """Returns {dotted name: file} for every module of the installed package."""
    out: dict[str, pathlib.Path] = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "preflight" and name.startswith(("preflight.checks",
                                                          "preflight.inventory")):
                continue  # no such folder inside preflight/: they are mapped from the top
            out[name] = path
    return out


MODULES = project_modules()


def edges(name: str) -> set[str]:
    """Returns the project modules `name` imports: `from pkg import mod` is an edge to
    pkg.mod (pkg's __init__ is counted by closure(), as Python runs it first)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out.update(subs or {node.module})
    return {m for m in out if m in MODULES and m != name}


def parents(name: str) -> Iterator[str]:
    """Yields the packages Python initialises before `name` (their __init__ runs first)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        yield ".".join(parts[:i])


def closure(name: str) -> set[str]:
    """Returns every project module that importing `name` loads: its imports, theirs, and
    the __init__ of every package on the way."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        m = todo.pop()
        for dep in [*edges(m), *parents(m)]:
            if dep not in seen and dep in MODULES:
                seen.add(dep)
                todo.append(dep)
    seen.discard(name)
    return seen


# Stage -> the modules it may load (prefixes). `preflight` itself holds only __version__.
# Every stage may load the model and common (pure helpers below the stages); beyond those,
# the exceptions are named here with why.
BELOW = ("preflight.model", "preflight.common")
ALLOWED = {
    "preflight.model": ("preflight.model",),
    "preflight.common": BELOW,
    # A check judges facts, with the model, its fellow checks and common's helpers.
    "preflight.checks": (*BELOW, "preflight.checks"),
    # Reports read the model and the JSON document (through config's one reader of
    # documents into types), never a live connection.
    "preflight.report": (*BELOW, "preflight.report", "preflight.config.errors",
                         "preflight.config.typed"),
    "preflight.config": (*BELOW, "preflight.config"),
    "preflight.inventory": (*BELOW, "preflight.config", "preflight.inventory"),
    # What runs on the hosts, on the ground floor: the shipped programs load nothing of
    # preflight (their "# joined" lines find their parts; the join leaves them out).
    "preflight.hostside": ("preflight.hostside",),
    # What is collected (the probe shipped, its output parsed), whatever transport runs it.
    "preflight.collect": (*BELOW, "preflight.collect", "preflight.hostside"),
    # The active tests run commands through the Remote a transport hands out (common) and
    # ship their Paddle jobs' scripts.
    "preflight.network": (*BELOW, "preflight.network", "preflight.hostside"),
    "preflight.placement": (*BELOW, "preflight.placement"),
    # Baselines and results logs are documents read back: through config's one reader, and
    # what the probe printed through collect's one parser (its sections' parsers, their
    # typed readers and nvidia-smi's).
    "preflight.history": (*BELOW, "preflight.history", "preflight.config",
                          "preflight.collect.parse", "preflight.collect.parse_net",
                          "preflight.collect.parse_gpu", "preflight.collect.fields",
                          "preflight.collect.smi"),
    # `preflight launch` reads the report (config's reader) and runs the plan through the
    # Remote a transport hands out; its job is stopped as every Paddle job preflight starts
    # (network/paddle_job.py sends every process signal).
    "preflight.act": (*BELOW, "preflight.act", "preflight.config",
                      "preflight.report.jsonreport", "preflight.network.paddle_job",
                      "preflight.hostside"),
    # A transport reaches hosts, runs commands there and ships what it is handed (the
    # probe is the collect stage's, given to it as a common.hostjob.ProbeCall; a plan's
    # batch script is placement's, given as a BatchJob): it loads no stage. The composers
    # (pipeline, watching, launching) put it together with the stages. Its one word of
    # configuration is the one-line UsageError.
    "preflight.transport": (*BELOW, "preflight.transport", "preflight.config.errors"),
    # The verdict runs the checks.
    "preflight.judge": (*BELOW, "preflight.checks", "preflight.judge"),
    # The watch ships its sampler and runs it through the Remote a transport hands out; its
    # log is read back as a document is (a bad one is config's one-line InputError).
    "preflight.watch": (*BELOW, "preflight.watch", "preflight.hostside",
                        "preflight.config.errors"),
}


def stage_of(name: str) -> str | None:
    return next((s for s in ALLOWED if name == s or name.startswith(s + ".")), None)


@pytest.mark.parametrize("name", [m for m in sorted(MODULES) if stage_of(m)])
def test_stage_loads_only_what_its_allow_list_names(name):
    allowed = ALLOWED[str(stage_of(name))]
    # A package on the way to an allowed module runs only its docstring (the test below).
    bad = sorted(m for m in closure(name) if m != "preflight" and not any(
        m == a or m.startswith(a + ".") or a.startswith(m + ".") for a in allowed))
    assert not bad, f"{name} loads {bad} (through its imports); {stage_of(name)} may load " \
                    f"only {allowed}"


def test_nothing_imports_the_cli():
    users = sorted(m for m in MODULES if not m.startswith("preflight.cli")
                   and m != "preflight.__main__"
                   and any(e.startswith("preflight.cli") for e in edges(m)))
    assert not users, f"{users} import preflight.cli: the CLI is the outermost layer"


def test_no_import_cycle():
    # Tarjan's strongly connected components over the explicit imports of every module.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(MODULES):
        if m not in index:
            visit(m)
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_finder_finds_a_cycle(monkeypatch):
    # The test above must be able to fail: two modules importing each other are a cycle.
    fake = {"preflight.a": {"preflight.b"}, "preflight.b": {"preflight.a"}}
    monkeypatch.setattr(sys.modules[__name__], "edges", lambda m: fake.get(m, set()))
    monkeypatch.setitem(MODULES, "preflight.a", SHIPPED_PARTS[0])
    monkeypatch.setitem(MODULES, "preflight.b", SHIPPED_PARTS[0])
    with pytest.raises(AssertionError, match="preflight.a"):
        test_no_import_cycle()


def test_subpackages_say_what_they_offer_and_load_nothing():
    # A stage's __init__ is its table of contents: importing one of its modules must not
    # drag in the others (checks/, inventory/ and cli/ are entry points and may).
    entry = {"preflight", "preflight.checks", "preflight.inventory", "preflight.cli"}
    # The watch's holds the step hook a training script imports, and its file's contract,
    # written once for the hook and the sampler that reads the file (standard library only).
    own = {"preflight.watch": {"preflight.hostside.stephook"}}
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name not in entry:
            assert ast.get_docstring(ast.parse(path.read_text())), f"{name}: no docstring"
            extra = edges(name) - own.get(name, set())
            assert not extra, f"{name}/__init__ imports {sorted(extra)}"


def test_preflight_holds_only_entry_modules():
    # Each composes stages (and the transport) for one command: a check (pipeline, judge),
    # a launch (launching), a watch (watching), a watch's log judged again with --act
    # rehearsed (replaying).
    top = sorted(p.name for p in (ROOT / "preflight").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "judge.py", "launching.py", "pipeline.py",
                   "replaying.py", "watching.py"]


# A check judges facts; it must not be able to open a connection, a process or a file.
FORBIDDEN_IN_CHECKS = ("fabric", "paramiko", "invoke", "socket", "subprocess", "os", "shutil",
                       "pathlib", "yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "checks").glob("*.py")), ids=lambda p: p.name)
def test_checks_do_no_io(path):
    bad = {m for m in imports(path) for f in FORBIDDEN_IN_CHECKS
           if m == f or m.startswith(f + ".")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


HELPERS = {"__init__", "common", "compat_table", "retests"}  # the registry and what checks share


def test_every_check_module_is_named_for_its_check_and_registered():
    from preflight.checks import ALL_CHECKS
    assert isinstance(ALL_CHECKS, tuple)
    names = [c.name for c in ALL_CHECKS]
    assert len(names) == len(set(names))
    modules = {p.stem for p in (ROOT / "checks").glob("*.py")} - HELPERS
    # `cpu-cores` lives in cpu_cores.py, its module's NAME; nothing else defines a check.
    assert {c.run.__module__.rsplit(".", 1)[-1] for c in ALL_CHECKS} == modules
    for spec in ALL_CHECKS:
        assert spec.run.__module__.rsplit(".", 1)[-1] == spec.name.replace("-", "_")
        assert spec.run.__name__ == "check"


OURS = sorted(p for d in ("preflight", "checks", "inventory", "tests")
              for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_bare_checks_or_inventory_imports(path):
    bare = {m for m in imports(path) if m.split(".")[0] in ("checks", "inventory")}
    assert not bare, f"{path}: import preflight.{sorted(bare)[0]} instead"


def stdlib_only(text: str, also: set[str]) -> None:
    """A shipped text: Python 3.6 syntax, the standard library (and also) only, no joined
    line left."""
    ast.parse(text, feature_version=(3, 6))
    top = {m.split(".")[0] for m in imports(text)} - also
    assert top <= set(sys.stdlib_module_names), sorted(top - set(sys.stdlib_module_names))
    assert not [ln for ln in text.splitlines() if ln.rstrip().endswith(ship.JOINED)]


def test_probe_is_stdlib_only_and_python36_syntax():
    # pynvml: imported inside try/except, used only where the host has it.
    stdlib_only(ship.probe(), {"pynvml"})


def test_the_watch_sampler_is_stdlib_only_and_python36_syntax():
    shipped = ship.sampler()
    stdlib_only(shipped, {"pynvml"})
    ns: dict[str, object] = {"__name__": "not-main"}
    exec(compile(shipped, "preflight-sampler", "exec"), ns)  # defines, runs nothing
    assert callable(ns["main"]) and callable(ns["cgroup_v1_quota"]) and callable(ns["gpu_reader"])


@pytest.mark.parametrize("name", ["allreduce", "ps_round"])
def test_the_job_scripts_are_stdlib_and_paddle_only_and_python36_syntax(name):
    stdlib_only(ship.script(name), {"paddle", "numpy"})


@pytest.mark.parametrize("name", ["master_free", "port_connector", "port_listener", "reap"])
def test_the_short_helpers_travel_whole_stdlib_only_and_python36_syntax(name):
    argv = ship.inline("python3", name, "an-argument")
    assert argv[2] == ship.part(name) and argv[3:] == ["an-argument"]
    stdlib_only(argv[2], set())


@pytest.mark.parametrize("path", SHIPPED_PARTS, ids=lambda p: p.name)
def test_shipped_parts_are_python36_syntax_and_import_the_package_only_where_joined(path):
    ast.parse(path.read_text(), feature_version=(3, 6))
    for line in path.read_text().splitlines():
        if "import preflight" in line or line.startswith("from preflight"):
            assert line.rstrip().endswith(ship.JOINED), line


def test_the_joined_probe_passes_its_parts_sources_on():
    ns: dict[str, object] = {"__name__": "not-main"}
    exec(compile(ship.probe(), "preflight-probe", "exec"), ns)  # defines, runs nothing
    assert ns["NVML_SRC"] == ship.part("nvml")
    assert ns["PADDLE_CHILD"] == ship.part("paddle_child")
    assert callable(ns["nvml_facts"]) and callable(ns["main"])


def test_only_ship_packs_a_text_for_the_trip():
    # zlib and marshal pack a shipped text; one module does it, for every way it travels.
    packers = sorted(name for name, path in MODULES.items()
                     if {"zlib", "marshal"} & imports(path)
                     and name != "preflight.hostside.ship")
    assert packers == [], packers


# The SSH libraries are the SSH transport's; the one other reader of the OpenSSH config
# (inventory/sshconfig.py applies it to the hosts before any transport runs) uses paramiko's
# parser only.
SSH_LIBRARIES = ("paramiko", "fabric", "invoke")
SSH_ALLOWED = ("preflight.transport.ssh", "preflight.inventory.sshconfig")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_the_ssh_transport_imports_the_ssh_libraries(name):
    if any(
            name == a or name.startswith(a + ".") for a in SSH_ALLOWED):
        return
    bad = {m for m in imports(MODULES[name]) for lib in SSH_LIBRARIES
           if m == lib or m.startswith(lib + ".")}
    assert not bad, f"{name} imports {sorted(bad)}: only transport/ssh/ may"


def test_a_transport_is_one_folder_and_one_line_of_the_table():
    # Every transport but the table and the protocol lives in its own folder, and the
    # stages above reach it only through the table (the CLI and the watch's run, which
    # compose a run, may also reach Slurm's job allocation and drain).
    folders = {p.name for p in (ROOT / "preflight" / "transport").iterdir() if p.is_dir()
               and p.name != "__pycache__"}
    table = (ROOT / "preflight" / "transport" / "table.py").read_text()
    assert folders == {"ssh", "slurm", "local"}
    for folder in folders:
        assert f"preflight.transport.{folder}.transport import" in table
    users = sorted(m for m in MODULES if not m.startswith(("preflight.transport",
                                                            "preflight.cli",
                                                            "preflight.watching"))
                   and any(e.startswith(("preflight.transport.ssh", "preflight.transport.slurm",
                                         "preflight.transport.local")) for e in edges(m)))
    assert not users, f"{users} reach a transport's folder directly, not through the table"


def _fake_parts(monkeypatch, sources: dict[str, str]) -> None:
    monkeypatch.setattr(ship, "part", lambda name: sources[name])


MAIN = 'def main():\n    return helper()\n\n\nif __name__ == "__main__":\n    main()\n'


def test_a_program_joins_the_parts_its_joined_lines_import_theirs_first(monkeypatch):
    _fake_parts(monkeypatch, {
        "prog": "from preflight.hostside.mid import helper  # joined\n" + MAIN,
        "mid": "from preflight.hostside.base import read  # joined\n\n\n"
               "def helper():\n    return read()\n",
        "base": "def read():\n    return 42\n"})
    assert ship.parts_of("prog") == ["base", "mid", "prog"]
    text = ship.join("prog")
    assert "# joined" not in text
    ns: dict[str, object] = {"__name__": "not-main"}
    exec(compile(text, "prog", "exec"), ns)
    assert ns["main"]() == 42  # type: ignore[operator]


@pytest.mark.parametrize("sources, said", [
    ({"prog": "from preflight.hostside.a import helper  # joined\n"
              "from preflight.hostside.b import other  # joined\n" + MAIN,
      "a": "def helper():\n    pass\n", "b": "def other():\n    pass\n\n\ndef helper():\n"
                                              "    pass\n"},
     "helper is defined in both a.py and b.py"),
    ({"prog": "from preflight.hostside.a import helper  # joined\n" + MAIN,
      "a": "def other():\n    pass\n"},
     "imports helper from a.py, which does not define it"),
    ({"prog": "from preflight.hostside.a import other as helper  # joined\n" + MAIN,
      "a": "def other():\n    pass\n"},
     "a joined name keeps its name"),
    ({"prog": "from preflight.hostside.a import helper  # joined\n" + MAIN,
      "a": "from preflight.hostside.prog import main  # joined\n\n\ndef helper():\n    pass\n"},
     "parts join in a cycle"),
])
def test_a_join_that_would_break_the_one_text_is_refused(monkeypatch, sources, said):
    # In the one text every part shares one namespace: a name defined twice, imported from
    # a part that lacks it, or renamed by an alias would fail on the host, not here.
    _fake_parts(monkeypatch, sources)
    with pytest.raises(RuntimeError, match=said):
        ship.join("prog")


MAX_LINES = 400


def test_no_module_is_over_400_lines():
    # A module past this holds more than one thing: split it where its parts part (the
    # probe's fact families, the parsers of them, a stage's steps).
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}, long
    assert any(name.startswith("preflight.checks.") for name in MODULES)  # every tree read
    assert any(name.startswith("preflight.inventory.") for name in MODULES)


def test_many_hosts_asking_for_the_probe_at_once_join_and_compile_it_once(monkeypatch):
    # A fan-out's threads ask for the probe's text and payload together on first use: each
    # joined and compiled once (a join per thread, one after another, held 32 hosts back by
    # seconds each), never two parses at once (CPython's ast.parse is not thread-safe).
    import threading
    real_join = ship.join
    joins: list[str] = []

    def counted(name: str) -> str:
        joins.append(name)
        return real_join(name)
    monkeypatch.setattr(ship, "join", counted)
    monkeypatch.setattr(ship, "_JOINED", {})
    monkeypatch.setattr(ship, "_PACKED", {})
    start = threading.Barrier(16)
    got: list[bytes] = []

    def host() -> None:
        start.wait(10)
        got.append(ship.stdin_payload(ship.probe()))
    threads = [threading.Thread(target=host) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert joins == ["probe"] and len(got) == 16 and len(set(got)) == 1
