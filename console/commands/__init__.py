"""The `rebound` command's groups and commands, one module per area; `register` adds them all to the app."""


def register(app) -> None:
    """Add the commands to `flask --app app`."""
    from console.commands.approvals import approvals_group
    from console.commands.audit import audit_group
    from console.commands.backup import backup_command
    from console.commands.channels import channels_group
    from console.commands.conflict_templates import templates_group
    from console.commands.dead_letters import dlq_group
    from console.commands.demo import seed_demo_command
    from console.commands.imports import import_failures_command
    from console.commands.inspection import retry_inspect_command, task_dryrun_command
    from console.commands.people import (
        create_token_command,
        create_user_command,
        revoke_token_command,
        set_password_command,
    )
    from console.commands.processes import scheduler_command, up_command, web_command, worker_command
    from console.commands.quota_classes import quota_classes_group
    from console.commands.reports import sla_report_command, task_sla_report_command
    from console.commands.reservations import reservations_group
    from console.commands.runbooks import recovery_runbook_command
    from console.commands.runs import runs_group
    from console.commands.tasks import tasks_group
    from console.commands.tenants import tenants_group

    for command in (up_command, retry_inspect_command, task_dryrun_command, web_command, worker_command,
                    scheduler_command, create_user_command, set_password_command, create_token_command,
                    revoke_token_command, seed_demo_command, audit_group, approvals_group, channels_group,
                    recovery_runbook_command, sla_report_command, tenants_group, import_failures_command,
                    reservations_group, templates_group, quota_classes_group, tasks_group,
                    dlq_group, runs_group, backup_command, task_sla_report_command):
        app.cli.add_command(command)
