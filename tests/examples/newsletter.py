"""A continue-on-failure pipeline, declared the same way as every other: one SendIssue message
per recipient of an issue; a recipient whose address cannot be mailed is dead-lettered with
the reason, and the rest of the issue goes out. docs/pipelines.md, "A continue-on-failure
pipeline"; added to the app by PIPELINE_MODULES=tests.examples.newsletter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.errors import InvalidInput, PermanentTaskError
from shared.domain.mailboxes import parse_mailbox
from shared.domain.pipelines import FailurePolicy, Pipeline
from shared.service_layer.ports import Email, EmailSender
from shared.service_layer.session_messages import Task, TaskInvocation

SEND_ISSUE = "SendIssue"


def check_recipient(payload: Mapping[str, Any]) -> None:
    """``{"email": ..., "issue": ...}``; ``InvalidInput`` names the field."""
    for field in ("email", "issue"):
        if not isinstance(payload.get(field), str) or not payload[field].strip():
            raise InvalidInput(field, "is required: text")
    parse_mailbox(payload["email"], field="email")


def build_tasks(email: EmailSender) -> dict[str, Task]:
    """The container's e-mail sender is the part the task needs (``shared.bootstrap.wiring``)."""
    return newsletter_tasks(email)


def newsletter_tasks(email: EmailSender) -> dict[str, Task]:
    def send_issue(call: TaskInvocation) -> Mapping[str, Any]:
        try:
            check_recipient(call.message.payload)
        except InvalidInput as error:
            raise PermanentTaskError(
                f"InvalidRecipient:{error.field}",
                f"Recipient {call.message.step}: {error.field} {error.problem}. Correct the "
                "address and replay the session.",
            ) from error
        issue = call.message.payload["issue"]
        email.send(
            Email(
                to=call.message.payload["email"],
                subject=issue,
                text=f"This is {issue}.",
                message_id=f"<{call.message.job_id}.{call.message.step}@pipelines.local>",
            )
        )
        return {}

    return {SEND_ISSUE: send_issue}


PIPELINE = Pipeline(
    name="newsletter",
    tasks=(SEND_ISSUE,),
    policy=FailurePolicy.CONTINUE_ON_FAILURE,
    queue_setting="NEWSLETTER_QUEUE_NAME",
    default_queue="newsletter-tasks",
    check_payload=check_recipient,
)
