"""Slack incoming webhook: {"text", "blocks"} with the facts and buttons that open the console."""

from console.services.delivery.http import Request, encode
from console.services.delivery.notice import Notice
from console.services.delivery.targets import Target

ICONS = {"critical": ":rotating_light:", "error": ":red_circle:", "warning": ":warning:",
         "info": ":information_source:"}


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as markup."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def document(notice: Notice) -> dict:
    """Return the Slack message for a notice."""
    icon = ":white_check_mark:" if notice.action == "resolve" else ICONS.get(notice.severity, ":red_circle:")
    text = f"{icon} {escape(notice.title)}: {escape(notice.summary)}"
    if notice.link:
        text += f" <{notice.link}|Open in Rebound>"
    blocks = [{"type": "section",
               "text": {"type": "mrkdwn", "text": f"{icon} *{escape(notice.title)}*\n{escape(notice.summary)}"[:3000]}}]
    if notice.facts:
        blocks.append({"type": "section", "fields": [
            {"type": "mrkdwn", "text": f"*{escape(label)}*\n{escape(value)}"[:2000]}
            for label, value in notice.facts[:10]]})
    if notice.links:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": label[:75]}, "url": url}
            for label, url in notice.links[:5]]})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(
        f"{notice.severity} · {notice.rule} · {notice.at:%Y-%m-%d %H:%M:%S} UTC · Rebound")}]})
    return {"text": text, "blocks": blocks}


def request(notice: Notice, target: Target) -> Request:
    return Request(target.url, encode(document(notice)))
