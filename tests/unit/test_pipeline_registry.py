"""The registry: a pipeline declared in a module of its own is all the app needs to run it,
whatever its failure policy; declarations that would collide are refused by name."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from shared.bootstrap import Container
from shared.config import Settings
from shared.domain.envelope import TaskMessage
from shared.domain.pipelines import FailurePolicy
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.pipelines import PIPELINE_MODULES_SETTING, Pipelines, registry
from shared.service_layer.processor import IncomingMessage, Outcome
from shared.service_layer.replay import replay_session
from tests.builders import APP_SETTINGS, dead_letter
from tests.fakes import (
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterQueue,
    InMemoryEmailSender,
    InMemoryResender,
    InMemorySessionActions,
    InMemorySessionOutcomes,
    InMemorySessionSeeder,
)

NEWSLETTER = {PIPELINE_MODULES_SETTING: "tests.examples.newsletter"}
RECIPIENTS = ["ada@example.com", "not an address", "alan@example.com"]


def issue_messages() -> list[TaskMessage]:
    return [
        TaskMessage(
            "issue-7",
            "newsletter",
            "SendIssue",
            step,
            step == len(RECIPIENTS),
            {"email": email, "issue": "Issue 7"},
        )
        for step, email in enumerate(RECIPIENTS, start=1)
    ]


def test_a_continue_on_failure_pipeline_runs_from_its_declaration_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PIPELINE_MODULES_SETTING, NEWSLETTER[PIPELINE_MODULES_SETTING])
    settings = Settings.from_env({**APP_SETTINGS, **NEWSLETTER, "NEWSLETTER_QUEUE_NAME": "nl"})
    email, outcomes, archive = (
        InMemoryEmailSender(),
        InMemorySessionOutcomes(),
        InMemoryDeadLetterArchive(),
    )
    c = Container(settings, email=email, session_outcomes=outcomes, archive=archive)
    processor = c.processor("newsletter")
    assert "nl" in c.session_queues
    assert processor.policy is FailurePolicy.CONTINUE_ON_FAILURE

    actions, dlq = InMemorySessionActions(), InMemoryDeadLetterQueue()
    results = []
    for message in issue_messages():
        result = processor.handle(
            IncomingMessage(
                message.to_json(), "issue-7", None, None, message.application_properties()
            ),
            actions,
        )
        results.append(result.outcome)
        if result.outcome is Outcome.DEAD_LETTERED:
            dlq.add(dead_letter(message, result.reason or "", queue="nl", session_id="issue-7"))

    assert results == [Outcome.COMPLETED, Outcome.DEAD_LETTERED, Outcome.COMPLETED]
    assert [m.to for m in email.sent] == ["ada@example.com", "alan@example.com"]
    (ended,) = outcomes.of_job("issue-7")
    assert (ended.status, ended.reason) == ("failed", "InvalidRecipient:email")

    # The archive holds only the failed recipient, its last message never comes: a
    # continue-on-failure session is replayed as it is, the failed message alone.
    archive_dead_letters(dlq, archive, queues=["nl"])
    resender = InMemoryResender()
    replayed = replay_session(archive, resender, InMemorySessionSeeder(), "issue-7", "k1")
    assert (replayed.pipeline, replayed.sent) == ("newsletter", 1)


def test_the_app_ships_the_purchase_first_then_the_import_and_a_setting_adds_more() -> None:
    shipped = [p.name for p in registry({})]
    assert shipped[:2] == ["purchase", "product_import"]
    assert [p.name for p in registry(NEWSLETTER)] == [*shipped, "newsletter"]


def test_declarations_that_collide_are_refused_naming_what_collides() -> None:
    purchase, imports, *_ = registry({})
    with pytest.raises(ValueError, match="'purchase'"):
        Pipelines((purchase, replace(imports, name="purchase")))
    with pytest.raises(ValueError, match="PURCHASE_QUEUE_NAME"):
        Pipelines((purchase, replace(imports, queue_setting="PURCHASE_QUEUE_NAME")))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"name": "Purchase Two"}, "pipeline name 'Purchase Two'"),
        ({"queue_setting": "PURCHASE_QUEUE"}, "queue_setting 'PURCHASE_QUEUE'"),
        ({"queue_setting": "REPLAY_QUEUE_NAME"}, "queue_setting 'REPLAY_QUEUE_NAME'"),
        ({"tasks": ()}, "declares no task"),
        ({"batch_triggers": 2}, "batch_triggers 2 must be at least 1, and 1 without batch"),
    ],
)
def test_a_declaration_the_generic_parts_could_not_read_is_refused(
    changes: dict[str, object], named: str
) -> None:
    purchase, *_ = registry({})
    with pytest.raises(ValueError, match=re.escape(named)):
        replace(purchase, **changes)  # type: ignore[arg-type]


def test_a_batch_pipeline_needs_at_least_one_trigger() -> None:
    _, imports, *_ = registry({})
    with pytest.raises(ValueError, match="batch_triggers 0 must be at least 1"):
        replace(imports, batch_triggers=0)
    assert replace(imports, batch_triggers=1).function_names == ("product_import_tasks",)


def test_a_module_that_declares_no_pipeline_is_named() -> None:
    with pytest.raises(ValueError, match=r"tests\.builders declares no PIPELINE"):
        registry({PIPELINE_MODULES_SETTING: "tests.builders"})


def test_a_pipelines_processor_is_built_when_first_asked_for_and_no_other() -> None:
    # An instance that only imports never loads the purchase's PDF renderer.
    container = Container(Settings.from_env(APP_SETTINGS))
    assert set(container.processors) == {p.name for p in registry({})}
    imports = container.processor("product_import")
    assert imports is container.processor("product_import")
    assert not container.built("receipt_renderer")
    assert container.processor("purchase").pipeline == "purchase"
    assert container.built("receipt_renderer")
    with pytest.raises(KeyError):
        container.processor("nobody")
