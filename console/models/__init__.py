"""SQLAlchemy models: the system of record."""

from console.models.alerts import AlertRule
from console.models.audit import AuditEntry, AuditHead
from console.models.capacity import Reservation
from console.models.delivery import ChannelSetting, Delivery
from console.models.people import ApiToken, EndedSession, Role, Tenant, User
from console.models.policies import PolicyVersion, RetryPolicyRecord
from console.models.quota_classes import QuotaClass
from console.models.recovery import (
    Approval,
    DeadLetter,
    OutboxMessage,
    RunbookBackup,
    RunbookChange,
    RunbookExecution,
    RunbookPolicy,
    WorkOrder,
    WorkOrderNote,
)
from console.models.reports import ForecastWarning, ReportState
from console.models.runs import AttemptDiagnostics, Run, RunEvent
from console.models.settings import ConsoleSetting
from console.models.tasks import EventReceipt, SlaBreach, Task
from console.models.templates import ConflictTemplate, ConflictTemplateVersion
from console.models.workflows import Workflow, WorkflowStep

__all__ = [
    "AlertRule", "ApiToken", "Approval", "AttemptDiagnostics", "AuditEntry", "AuditHead", "ChannelSetting",
    "ConflictTemplate", "ConflictTemplateVersion", "ConsoleSetting", "DeadLetter", "EndedSession",
    "Delivery", "EventReceipt", "ForecastWarning", "OutboxMessage", "PolicyVersion", "QuotaClass",
    "ReportState", "Reservation", "RetryPolicyRecord",
    "Role", "Run",
    "RunEvent", "RunbookBackup", "RunbookChange", "RunbookExecution", "RunbookPolicy", "SlaBreach", "Task", "Tenant",
    "User", "WorkOrder", "WorkOrderNote", "Workflow", "WorkflowStep",
]
