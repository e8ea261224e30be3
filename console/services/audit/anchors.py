"""Publish the audit chain's head outside the database: an append-only anchor file and a log line."""

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from console import private
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import AuditEntry, AuditHead
from console.services.audit.chain import GENESIS
from console.services.settings import setting

log = logging.getLogger("rebound.audit")
FILE_NAME = "audit-anchor.log"
_LINE = re.compile(r"^(?P<at>\S+) seq=(?P<seq>\d+) mac=(?P<mac>[0-9a-f]{64}) keyed_from=(?P<keyed_from>\d+)$")
_TAIL_BYTES = 4096


@dataclass(frozen=True)
class Anchor:
    """The chain's head as it was published once: at that time row `seq` had MAC `mac`."""

    line: int
    at: str
    seq: int
    mac: str
    keyed_from: int

    def text(self) -> str:
        return f"{self.at} seq={self.seq} mac={self.mac} keyed_from={self.keyed_from}"


class BadAnchorFile(Exception):
    """A line of the anchor file is not an anchor (edited, or not ours)."""


def path() -> Path:
    """Return where anchors are written: REBOUND_AUDIT_ANCHOR_FILE, else audit-anchor.log in the data dir."""
    return Path(setting("AUDIT_ANCHOR_FILE") or Path(setting("DATA_DIR")) / FILE_NAME)


def parse(number: int, text: str) -> Anchor:
    """Read one line of the anchor file."""
    match = _LINE.match(text.strip())
    if not match:
        raise BadAnchorFile(f"line {number} of {path()} is not an anchor: {text.strip()[:120]!r}")
    return Anchor(number, match["at"], int(match["seq"]), match["mac"], int(match["keyed_from"]))


def read_all(where: Path | None = None) -> list[Anchor]:
    """Return every anchor in the file, oldest first (none if there is no file yet)."""
    where = where or path()
    if not where.exists():
        return []
    with where.open(encoding="ascii", errors="replace") as lines:
        return [parse(number, text) for number, text in enumerate(lines, start=1) if text.strip()]


def _last(where: Path) -> Anchor | None:
    if not where.exists():
        return None
    with where.open("rb") as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - _TAIL_BYTES))
        lines = [text for text in handle.read().decode("ascii", "replace").splitlines() if text.strip()]
    # The line number is unknown from the tail alone; only read_all's numbers are shown to people.
    return parse(0, lines[-1]) if lines else None


def _append(where: Path, anchor: Anchor) -> None:
    private.make_dir(where.parent)  # most often the data dir, which a scheduler may be the first to create
    # O_APPEND and one write per line: several processes (the scheduler's job, a `verify` on the same host)
    # append whole lines without interleaving or overwriting one another.
    fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (anchor.text() + "\n").encode("ascii"))
    finally:
        os.close(fd)


def current(session, clock: Clock = SYSTEM_CLOCK) -> Anchor:
    """Return the chain's committed head as an anchor (not yet written)."""
    head = session.execute(select(AuditHead).where(AuditHead.id == 1)).scalar_one_or_none()
    seq, mac, keyed_from = (head.seq, head.hash, head.keyed_from) if head else (0, GENESIS, 1)
    return Anchor(0, clock().isoformat(timespec="seconds"), seq, mac, keyed_from)


def publish(anchor: Anchor, where: Path | None = None) -> None:
    """Append one anchor to the file and say the head in the log, which is shipped off-host in most set-ups."""
    _append(where or path(), anchor)
    log.info("audit head seq=%d mac=%s (%d rows, keyed from row %d)", anchor.seq, anchor.mac, anchor.seq,
             anchor.keyed_from)


def still_on_chain(session, anchor: Anchor) -> bool:
    """Tell whether row `anchor.seq` still carries the anchored MAC (one row read)."""
    if anchor.seq == 0:
        return anchor.mac == GENESIS
    mac = session.execute(select(AuditEntry.hash).where(AuditEntry.seq == anchor.seq)).scalar_one_or_none()
    return mac == anchor.mac


def tick(clock: Clock = SYSTEM_CLOCK) -> Anchor | None:
    """Anchor the head if it moved since the last anchor: the scheduler leader's periodic job."""
    where = path()
    try:
        last = _last(where)
    except BadAnchorFile as error:
        log.error("audit anchor not written: %s", error)
        return None
    session = db.session
    try:
        anchor = current(session, clock)
        if last is not None and not still_on_chain(session, last):
            # Anchoring a rewritten head would bury the evidence under a fresh line; say it loudly instead.
            log.error("audit chain no longer holds row %d as anchored at %s: run `rebound audit verify`",
                      last.seq, last.at)
            return None
    finally:
        session.rollback()
    if last is not None and (last.seq, last.mac, last.keyed_from) == (anchor.seq, anchor.mac, anchor.keyed_from):
        return None
    publish(anchor, where)
    return anchor

