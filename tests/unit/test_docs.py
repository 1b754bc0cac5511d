"""The documentation speaks for the code: the generated pages are what the code says now, every
check documents itself, and the README stays an entry point that links into docs/."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shlex
import sys
from dataclasses import replace
from typing import Any

import pytest
import yaml

from preflight.checks import ALL_CHECKS
from preflight.cli import docgen
from preflight.model.policy import Limits

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(docgen.GENERATORS))
def test_the_generated_pages_are_what_the_code_says(name):
    committed = (ROOT / "docs" / name).read_text()
    assert committed == docgen.GENERATORS[name](), (
        f"docs/{name} has drifted from the code: run .venv/bin/python -P -m "
        "preflight.cli.docgen docs")


@pytest.mark.parametrize("spec", ALL_CHECKS, ids=lambda c: c.name)
def test_every_check_says_what_why_and_how_to_fix(spec):
    mod = sys.modules[spec.run.__module__]
    assert mod.ABOUT.strip() and mod.WHY.strip() and mod.FIX.strip()
    limits = {f.name for f in dataclasses.fields(Limits)}
    assert set(mod.LIMITS) <= limits, f"{spec.name}: no such limits {set(mod.LIMITS) - limits}"


def test_every_limit_is_documented_by_a_check_or_the_plan():
    # A policy limit no page mentions is a knob nobody can find.
    pages = (ROOT / "docs" / "checks.md").read_text() + (ROOT / "docs" / "policy.md").read_text()
    missing = [f.name for f in dataclasses.fields(Limits) if f"`{f.name}`" not in pages
               and f"{f.name}:" not in pages]
    assert not missing


def test_the_readme_is_an_entry_point_whose_links_lead_somewhere():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    # One sentence on what preflight is and for whom, then the two commands.
    title, opening, commands = text.split("\n\n")[:3]
    assert title == "# preflight" and opening.count(". ") == 0 and opening.endswith(").")
    assert commands.splitlines()[1].startswith(
        "bash scripts/setup.sh && .venv/bin/preflight demo")
    # The second runs the tests, exactly as CI does.
    test_command = commands.splitlines()[2].split("#")[0].strip()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert test_command == "bash scripts/test.sh" and ci[-1] == test_command
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and all((ROOT / link).is_file() for link in links), links
    for page in (ROOT / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([\w-]+\.md)", page.read_text()):
            assert (ROOT / "docs" / link).is_file(), f"{page.name} links to missing {link}"


def _yaml_blocks(page: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


def test_the_docs_container_examples_read_and_start_as_the_runtimes_take_them(tmp_path):
    # Every container example of the docs is read by the real readers, and its command line
    # is one the runtime accepts: never --shm-size beside --ipc host, which Podman refuses
    # ("cannot set shmsize when running in the host IPC Namespace").
    from preflight.common.containercmd import run_argv
    from preflight.config.container import layer, spec_of
    from preflight.config.document import Fields
    from preflight.config.policy import load_policy

    specs: list[Any] = []
    for block in _yaml_blocks("containers.md"):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and "container" in doc:
            spec = spec_of("docs/containers.md", [
                layer(Fields("docs/containers.md", doc["container"], "container"))])
            assert spec is not None
            specs.append(spec)
    [policy_block] = _yaml_blocks("policy.md")
    path = tmp_path / "policy.yaml"
    path.write_text(policy_block)
    policy = load_policy(str(path))
    assert policy.container is not None
    specs.append(spec_of(str(path), [policy.container]))
    assert len(specs) >= 2
    for spec in specs:
        for runtime in ("docker", "podman"):
            argv = run_argv(replace(spec, runtime=runtime), ["true"])
            assert not ("--shm-size" in argv and "--ipc" in argv
                        and argv[argv.index("--ipc") + 1] == "host"), argv


def test_the_readmes_list_of_checks_is_every_check_the_code_runs():
    text = (ROOT / "README.md").read_text()
    assert docgen.with_readme_checks(text) == text, (
        "README.md's list of checks has drifted: run .venv/bin/python -P -m "
        "preflight.cli.docgen docs")
    for spec in ALL_CHECKS:
        assert f"`{spec.name}`" in text


def command_examples() -> list[tuple[str, str]]:
    """(file, line) for every `preflight ...` line of the README's and the docs' shell
    blocks, as a user would paste it."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", path.read_text(), re.S):
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("preflight "):
                    out.append((path.name, line))
    return out


def test_every_command_in_the_docs_is_accepted_as_written():
    from preflight.cli.args import build_parser
    examples = command_examples()
    assert len(examples) >= 15, examples
    for name, line in examples:
        argv = shlex.split(line, comments=True)
        for op in ("&&", "||", "|", ">", ";"):  # the command alone, not what follows it
            argv = argv[:argv.index(op)] if op in argv else argv
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as e:  # --version and --help exit 0 after printing
            assert e.code == 0, f"{name}: {line}"
