"""The onboarding example's three tasks. Each is idempotent (a redelivery or a replay does
no harm: ids derive from the job) and returns what the next one needs; the processor keeps
it in the session's context, so each task sees what the earlier ones made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.errors import PermanentTaskError
from shared.service_layer.ports import Email, EmailSender, ProductCatalog
from shared.service_layer.session_messages import Task, TaskInvocation

from .onboarding import CREATE_ACCOUNT, PROVISION_WORKSPACE, SEND_WELCOME_EMAIL


def build_tasks(catalog: ProductCatalog, email: EmailSender) -> dict[str, Task]:
    """The tasks, given the container's catalogue and e-mail sender (the parts named by the
    parameters: ``shared.bootstrap.wiring``)."""

    def create_account(call: TaskInvocation) -> Mapping[str, Any]:
        return {"account_id": f"acct-{call.message.job_id}"}

    def provision_workspace(call: TaskInvocation) -> Mapping[str, Any]:
        plan = call.message.payload["plan"]
        if plan not in catalog.find([plan]):
            raise PermanentTaskError(
                "UnknownPlan",
                f"The plan {plan} is not in the product catalogue: import it, then replay "
                "the session.",
            )
        return {"workspace": f"ws-{call.context['account_id']}"}

    def send_welcome_email(call: TaskInvocation) -> Mapping[str, Any]:
        account, workspace = call.context["account_id"], call.context["workspace"]
        email.send(
            Email(
                to=call.message.payload["email"],
                subject=f"Welcome to {workspace}",
                text=f"Hello {call.message.payload['name']}, your account {account} and its "
                f"workspace {workspace} are ready.",
                message_id=f"<{call.message.job_id}.welcome@pipelines.local>",
            )
        )
        return {}

    return {
        CREATE_ACCOUNT: create_account,
        PROVISION_WORKSPACE: provision_workspace,
        SEND_WELCOME_EMAIL: send_welcome_email,
    }
