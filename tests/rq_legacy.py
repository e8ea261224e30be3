"""Jobs an RQ deployment from before Rebound ran, and that failed: the import tests' real RQ worker runs these."""


def charge(order_id: int, amount: int = 10):
    """Fail as a payment job whose card was declined (one error group, whatever the order)."""
    raise ValueError(f"card declined for order {order_id}")


def send_mail(to: str):
    """Fail as a mail job whose server did not answer."""
    raise ConnectionError(f"smtp server did not answer for {to}")


def poll_partner():
    """Ask RQ to try again, always: after Retry's max, RQ fails the job (and counts its retries)."""
    from rq import Retry

    return Retry(max=2)
