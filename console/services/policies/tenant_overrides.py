"""What a person or token limited to one tenant may not override in a policy: a breaker every tenant shares."""

from console.services.actor import Actor
from console.services.errors import Forbidden

OWN_BREAKER = "handler_and_tenant"  # a breaker per handler and tenant: the tenant's own


def keep_breaker_to_tenant(policy, actor: Actor) -> None:
    """Refuse breaker settings in a tenant-limited person's policy override unless the breaker is their tenant's own.

    A handler-wide breaker counts every tenant's runs of the handler, and the settings of the run whose failure opens
    it say for how long: one tenant's token sent `failure_threshold` 1 and `open_s` 86400, and held every tenant's
    runs of that handler for a day (helper 152). Named policies are shared and changed by unscoped people only.
    """
    if actor.tenant_id is None or not isinstance(policy, dict):
        return
    nested = policy.get("breaker")
    settings = {**(nested if isinstance(nested, dict) else {}),
                **{key.removeprefix("breaker_"): value for key, value in policy.items()
                   if isinstance(key, str) and key.startswith("breaker_")}}
    if settings and settings.get("scope") != OWN_BREAKER:
        raise Forbidden("a handler's circuit breaker is shared by every tenant: limited to one tenant, you may set "
                        f"breaker settings only for your tenant's own (breaker.scope {OWN_BREAKER})", "policy.breaker")
