"""Browser fixtures."""

import pytest


@pytest.fixture
def page(live_server, page):
    """Playwright's page, opened after the live server and so closed before it stops.

    Stopped with the browser's keep-alive connections still open, gunicorn's graceful stop took 2.3 s. Its quick
    stop (SIGINT) is not the answer: a gthread worker can deadlock in its SIGQUIT handler (ThreadPoolExecutor's
    lock, taken again in the handler while a request is being submitted) until it is killed 10 s later.
    """
    return page
