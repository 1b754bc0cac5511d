"""Turns inventory entries into hosts as `ssh NAME` would reach them: the inventory's values
first, then the user's OpenSSH config (HostName, User, Port, IdentityFile, ProxyJump,
ProxyCommand, ConnectTimeout, UserKnownHostsFile, GlobalKnownHostsFile, HostKeyAlias,
HashKnownHosts), then OpenSSH's defaults: the current user (never root by assumption),
port 22, ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts."""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Optional

from preflight.config.container import spec_of
from preflight.inventory import validate as V
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError
from preflight.inventory.sshconfig import SshConfig
from preflight.model.container import ContainerLayer
from preflight.model.host import Host, SshTarget, local_user

# The job's container below the inventory's (the policy's) and above it (the command line's).
ContainerLayers = tuple[Optional[ContainerLayer], Optional[ContainerLayer]]

USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MAX_HOPS = 8  # a ProxyJump chain longer than this is a loop in the config
_HOP = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@/\s]+)@)?(?:\[(?P<v6>[^\]]+)\]|"
                  r"(?P<host>[^:@/\s\[\]]+))(?::(?P<port>\d+))?/?$")


def parse_hop(spec: str) -> tuple[Optional[str], str, Optional[int]]:
    """Splits one ProxyJump hop, '[user@]host[:port]' or 'ssh://user@host:port'."""
    m = _HOP.match(spec.strip())
    if not m:
        raise ValueError(f"{spec!r} is not [user@]host[:port]")
    port = int(m.group("port")) if m.group("port") else None
    return m.group("user"), m.group("v6") or m.group("host"), port


def jump_from_proxy_command(command: str) -> Optional[str]:
    """The hop of the classic `ssh [-l user] [-p port] -W %h:%p bastion` ProxyCommand (what
    ProxyJump replaced), or None for any other command."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if not argv or os.path.basename(argv[0]) != "ssh" or "-W" not in argv:
        return None
    user = port = dest = None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-l", "-p", "-W", "-i", "-o", "-F", "-J"):
            if i + 1 >= len(argv) or a in ("-F", "-J", "-o", "-i"):
                return None  # options that change how the hop is reached: run it as is
            if a == "-l":
                user = argv[i + 1]
            elif a == "-p":
                port = argv[i + 1]
            i += 2
            continue
        if a.startswith("-"):
            if a.strip("-").strip("qvTnNAaCx46"):  # a flag with a value we do not model
                return None
            i += 1
            continue
        if dest is not None:
            return None  # a remote command after the destination
        dest = a
        i += 1
    if dest is None:
        return None
    return (f"{user}@" if user and "@" not in dest else "") + dest + (f":{port}" if port else "")


class Resolver:
    def __init__(self, config: SshConfig, source: str, fmt: str = "yaml",
                 containers: ContainerLayers = (None, None), python: Optional[str] = None,
                 ) -> None:
        self.config, self.source, self.fmt = config, source, fmt
        self.containers, self.python = containers, python

    def _fail(self, message: str, host: str, field: str) -> InventoryError:
        return InventoryError(self.config.path, message, host, field)

    def _opts(self, name: str) -> dict[str, Any]:
        return self.config.lookup(name)

    def _known_hosts(self, opts: dict[str, Any], inventory_file: Optional[str]
                     ) -> tuple[str, ...]:
        users = [inventory_file] if inventory_file else \
            str(opts.get("userknownhostsfile") or " ".join(USER_KNOWN_HOSTS)).split()
        globals_ = str(opts.get("globalknownhostsfile") or " ".join(GLOBAL_KNOWN_HOSTS)).split()
        return tuple(os.path.expanduser(p) for p in users + globals_ if p != "none")

    def _address(self, name: str, opts: dict[str, Any]) -> str:
        try:
            return V.address(str(opts.get("hostname") or name))
        except V.BadValue as e:
            raise self._fail(str(e), name, "HostName") from None

    def _int(self, opts: dict[str, Any], key: str, name: str, field: str) -> Optional[int]:
        if key not in opts:
            return None
        try:
            return V.port(int(opts[key])) if key == "port" else int(opts[key])
        except (ValueError, V.BadValue):
            raise self._fail(f"{opts[key]!r} is not a number", name, field) from None

    def _chain(self, spec: str, name: str, depth: int) -> tuple[Host, ...]:
        """The hops of a ProxyJump value, first hop first, each resolved through the config.
        As `ssh -J a,b` does, b is reached through a; a through its own ProxyJump, if its
        Host block has one (a bastion behind a bastion)."""
        if spec.strip().lower() == "none":
            return ()
        if depth >= MAX_HOPS:
            raise self._fail(f"ProxyJump chain longer than {MAX_HOPS} hops (a loop?)", name,
                             "ProxyJump")
        chain: list[Host] = []
        for i, part in enumerate(spec.split(",")):
            try:
                user, hop_name, port = parse_hop(part)
                V.address(hop_name)
                if user is not None:
                    V.user(user)
            except (ValueError, V.BadValue) as e:
                raise self._fail(f"bad ProxyJump hop: {e}", name, "ProxyJump") from None
            opts = self._opts(hop_name)
            if i == 0 and opts.get("proxyjump") and not _to_itself(opts["proxyjump"], hop_name):
                chain += self._chain(str(opts["proxyjump"]), hop_name, depth + 1)
            chain.append(Host(name=hop_name, address=self._address(hop_name, opts),
                              target=self._ssh(hop_name, opts, Entry(hop_name, user=user,
                                                                     port=port))))
        return tuple(chain)

    def _ssh(self, name: str, opts: dict[str, Any], e: Entry,
             jump: tuple[Host, ...] = ()) -> SshTarget:
        """How SSH reaches a host or a hop: the inventory's values, else the config's, else
        OpenSSH's defaults."""
        return SshTarget(
            user=e.user or str(opts.get("user") or local_user()),
            port=e.port or self._int(opts, "port", name, "Port") or 22,
            identity_files=(e.identity_file,) if e.identity_file else
            tuple(opts.get("identityfile") or ()),
            known_hosts=self._known_hosts(opts, e.known_hosts),
            jump=jump,
            host_key_alias=opts.get("hostkeyalias"),
            hash_known_hosts=str(opts.get("hashknownhosts", "no")).lower() == "yes",
            connect_timeout=self._int(opts, "connecttimeout", name, "ConnectTimeout"))

    def host(self, e: Entry) -> Host:
        if e.identity_file and not os.path.exists(e.identity_file):
            # A key the inventory names is meant, not a default that may be absent (as
            # OpenSSH's IdentityFile lines are): a typo, told before any host is reached.
            field = ("ansible_ssh_private_key_file" if self.fmt.startswith("ansible")
                     else "identity_file")
            raise InventoryError(e.path or self.source, f"identity file {e.identity_file} does "
                                 "not exist", e.name, field, e.line)
        opts = self._opts(e.name)
        try:
            address = e.address or self._address(e.name, opts)
        except InventoryError as err:
            if opts.get("hostname", e.name) != e.name:
                raise
            # The name itself is what ssh would be given: the inventory's fault.
            raise InventoryError(e.path or self.source, str(err).rsplit(": ", 1)[-1], e.name,
                                 "name", e.line) from None
        jump_spec = e.jump or opts.get("proxyjump")
        if jump_spec and _to_itself(jump_spec, e.name):
            jump_spec = None
        if not jump_spec and opts.get("proxycommand") and \
                str(opts["proxycommand"]).lower() != "none":
            jump_spec = jump_from_proxy_command(str(opts["proxycommand"]))
            if jump_spec is None:
                raise self._fail("only ProxyJump and 'ssh -W %h:%p HOST' ProxyCommands are "
                                 "supported; write ProxyJump for this host", e.name,
                                 "ProxyCommand")
        jump = self._chain(str(jump_spec), e.name, 0) if jump_spec else ()
        below, above = self.containers
        return Host(name=e.name, address=address,
                    python=e.python or self.python or e.interpreter or "python3",
                    probe_python=e.probe_python, roles=e.roles, groups=e.groups,
                    slots=e.slots, target=self._ssh(e.name, opts, e, jump),
                    container=spec_of(e.path or self.source, [below, e.container, above],
                                      e.name))


def _to_itself(spec: Any, name: str) -> bool:
    """A `Host *` ProxyJump also matches the bastion itself: ssh then goes to it directly."""
    try:
        return parse_hop(str(spec).split(",")[0])[1].lower() == name.lower()
    except ValueError:
        return False


def resolve(inv: Inventory, config: SshConfig,
            containers: ContainerLayers = (None, None), python: Optional[str] = None,
            ) -> list[Host]:
    """Returns the inventory's hosts with the config applied and their containers merged,
    python the training interpreter where the inventory names none (--python); raises
    InventoryError (InputError for a container no layer completes)."""
    r = Resolver(config, inv.source, inv.fmt, containers, python)
    return [r.host(e) for e in inv.entries]

