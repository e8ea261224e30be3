"""SQLAlchemy models: the system of record."""

from console.models.alerts import AlertRule
from console.models.audit import AuditEntry, AuditHead
from console.models.delivery import ChannelSetting, Delivery
from console.models.people import ApiToken, Role, Tenant, User
from console.models.policies import PolicyVersion, RetryPolicyRecord
from console.models.recovery import Approval, DeadLetter, OutboxMessage, RunbookExecution, WorkOrder
from console.models.reports import ForecastWarning, ReportState
from console.models.runs import Run, RunEvent
from console.models.tasks import SlaBreach, Task

__all__ = [
    "AlertRule", "ApiToken", "Approval", "AuditEntry", "AuditHead", "ChannelSetting", "DeadLetter", "Delivery",
    "ForecastWarning", "OutboxMessage", "PolicyVersion", "ReportState", "RetryPolicyRecord", "Role", "Run", "RunEvent",
    "RunbookExecution", "SlaBreach", "Task", "Tenant", "User", "WorkOrder",
]
