"""Who acts from a terminal: the CLI, with the account and host it runs as, so the audit trail names a hand."""

import os
import pwd
import socket

from console.services.actor import Actor


def account() -> str:
    """The OS account this process runs as (its real uid, not $USER), with who ran sudo, and the host."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a container's uid with no passwd entry
        name = f"uid {uid}"
    sudo = os.environ.get("SUDO_USER")  # set by sudo: the person behind a root shell
    who = f"{sudo} as {name}" if sudo and sudo != name else name
    return f"terminal {who}@{socket.gethostname()}"[:64]  # the audit's remote_addr column


def cli_actor(name: str = "cli", user_id: int | None = None) -> Actor:
    """The actor of a command typed in a terminal; its account shows where the web shows an address."""
    return Actor(name, user_id, remote_addr=account())
