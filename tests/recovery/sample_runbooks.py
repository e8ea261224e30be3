"""Runbooks for tests only: steps that take their time, a dry-run that tries to write, one that fails."""

from sqlalchemy import update

from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.extensions import db
from console.models import Tenant
from console.services.recovery.runbook_registry import Runbook


def steps(ctx) -> None:
    """Log and record one change per step, committing each, pausing between them."""
    for number in range(1, ctx.params["steps"] + 1):
        ctx.log(f"step {number} of {ctx.params['steps']}")
        ctx.change("step", number, "done", False, True)
        ctx.commit()
        ctx.sleep(ctx.params["pause_s"])


def writes_anyway(ctx) -> None:
    """Write to the database even in a dry-run: a bug the dry-run's connection refuses."""
    ctx.log("about to write, dry-run or not")
    db.session.execute(update(Tenant).values(max_queued=Tenant.max_queued + 1))
    ctx.change("tenant", "all", "max_queued", "n", "n + 1")
    ctx.commit()


def fails(ctx) -> None:
    """Commit one change, then fail."""
    ctx.change("step", 1, "done", False, True)
    ctx.log("step 1 done")
    ctx.commit()
    ctx.change("step", 2, "done", False, True)
    raise RuntimeError("disk on fire")


def reprices(ctx) -> None:
    """Record changes whose values are whole-number floats (a JSON column gives 9.0 back as 9)."""
    ctx.change("invoice", 1, "amount", 10.0, 9.0)
    ctx.change("invoice", 1, "lines", [{"price": 10.0}], [{"price": 9.0}])
    ctx.commit()


def refuses(ctx) -> None:
    """Fail before changing anything (as a range too large to look at does)."""
    raise RuntimeError("that range holds more than 1000 firings")


def leaks(ctx) -> None:
    """Log the key it was given, then fail naming it: a runbook's author did both (helper 120)."""
    ctx.log(f"connecting with {ctx.params['api_key']}")
    raise RuntimeError(f"db refused credential {ctx.params['api_key']}")


DECLARED_PASSWORD = "hunter2-PW-xyz"


def connects(ctx) -> None:
    """Say which password it was given: a secret-named default is used when none is typed, and never shown."""
    ctx.log("connected with the declared password" if ctx.params["db_password"] == DECLARED_PASSWORD
            else "connected with another password")


STEP_PARAMS = (Param("steps", T.INT, default=3, minimum=1, maximum=1000), Param("pause_s", T.FLOAT, default=0.0))
RUNBOOKS = (
    Runbook("sample_steps", "Steps", "Log and record a few steps.", Risk.LOW, STEP_PARAMS, steps),
    Runbook("sample_gated", "Gated steps", "Steps that need approval.", Risk.HIGH, STEP_PARAMS, steps),
    Runbook("sample_writer", "Writer", "Writes even in a dry-run.", Risk.LOW, (), writes_anyway),
    Runbook("sample_fails", "Fails", "Fails after one step.", Risk.MEDIUM, (), fails),
    Runbook("sample_refuses", "Refuses", "Fails before any change.", Risk.LOW, (), refuses),
    Runbook("sample_reprice", "Reprice", "Changes amounts, approved first.", Risk.HIGH, (), reprices),
    Runbook("sample_leaky", "Leaky", "Logs and fails with its key.", Risk.LOW,
            (Param("api_key", T.STR, required=True),), leaks),
    Runbook("sample_connects", "Connects", "Connects with a declared password.", Risk.LOW,
            (Param("db_password", T.STR, default=DECLARED_PASSWORD),), connects),
)
