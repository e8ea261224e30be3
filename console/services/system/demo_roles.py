"""What a manager and an approver find in a fresh demo: a fortnight of report history, and a data fix waiting."""

from sqlalchemy import select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run
from console.services.actor import DEMO, Actor
from console.services.people import users
from console.services.recovery import params_fix
from console.services.reports import rollup
from console.services.system.demo_reports import seed_report_history

HISTORY_RUNS, HISTORY_DAYS, HISTORY_TASKS = 4000, 14, 6
# Files the waiting request, so the first admin (or any approver) can decide it: nobody approves their own.
REQUESTER = "demo-requester"
FIX_REASON = ("Demo: what made this run fail has been fixed upstream; replay it once with fail_times 0 so it goes "
              "through. Approve it to watch the replay succeed and the dead letter close.")


def seed(clock: Clock = SYSTEM_CLOCK) -> str:
    """Write the report history (rolled up at once) and file one params fix, from a person who cannot log in."""
    said = [seed_report_history(HISTORY_RUNS, HISTORY_DAYS, HISTORY_TASKS, clock=clock, chronological=True)]
    said.append(file_waiting_fix(clock))
    rollup.rebuild()  # the history lies in the past: rolled up now, not one day per minute
    return "\n".join(said)


def file_waiting_fix(clock: Clock = SYSTEM_CLOCK) -> str:
    """File a params fix of the newest open `demo.flaky` dead letter, as a requester who is no longer active."""
    letter_id = db.session.execute(
        select(DeadLetter.id).join(Run, Run.id == DeadLetter.run_id)
        .where(DeadLetter.status == "open", Run.handler == "python:demo.flaky")
        .order_by(DeadLetter.id.desc()).limit(1)).scalar_one_or_none()
    if letter_id is None:
        return "No open demo.flaky dead letter to file a data fix for."
    requester = users.find(REQUESTER)
    if requester is None:
        requester, _ = users.create(REQUESTER, "operator", None, DEMO)  # its password is never shown
        users.update(requester, DEMO, active=False)  # it cannot log in: it only asked
    approval = params_fix.request_fix(letter_id, {"fail_times": 0}, FIX_REASON,
                                      Actor(REQUESTER, requester.id), clock=clock)
    return f"Data fix request #{approval.id} (dead letter {letter_id}) waits for an approver."
