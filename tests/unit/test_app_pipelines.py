"""The app's pipelines: a declaration and its tasks are all the app needs to run a pipeline,
whatever its failure policy; declarations that would collide are refused by name, and so is
a builder that asks for what the container does not have."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from shared.bootstrap import Container, app_pipelines
from shared.bootstrap.wiring import Wired
from shared.config import PIPELINE_MODULES_SETTING
from shared.domain.envelope import TaskMessage
from shared.domain.pipelines import FailurePolicy, Pipelines
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.processor import IncomingMessage, Outcome
from shared.service_layer.replay import replay_session
from tests.builders import APP_SETTINGS, PIPELINES, app_settings, dead_letter
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
    settings = app_settings({**APP_SETTINGS, **NEWSLETTER, "NEWSLETTER_QUEUE_NAME": "nl"})
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
    replayed = replay_session(
        archive,
        resender,
        InMemorySessionSeeder(),
        "issue-7",
        "k1",
        pipelines=c.pipelines.declared,
    )
    assert (replayed.pipeline, replayed.sent) == ("newsletter", 1)


def test_the_list_holds_the_shipped_pipelines_and_a_setting_adds_more_in_listed_order() -> None:
    shipped = list(PIPELINES)
    assert {"purchase", "product_import"} <= {p.name for p in shipped}
    with_newsletter = list(app_pipelines(NEWSLETTER).declared)
    (newsletter,) = [p for p in with_newsletter if p not in shipped]
    assert with_newsletter == sorted([*shipped, newsletter], key=lambda p: (p.listed, p.name))


def test_declarations_that_collide_are_refused_naming_what_collides() -> None:
    purchase, imports, *_ = PIPELINES
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
    purchase, *_ = PIPELINES
    with pytest.raises(ValueError, match=re.escape(named)):
        replace(purchase, **changes)  # type: ignore[arg-type]


def test_a_batch_pipeline_needs_at_least_one_trigger() -> None:
    _, imports, *_ = PIPELINES
    with pytest.raises(ValueError, match="batch_triggers 0 must be at least 1"):
        replace(imports, batch_triggers=0)
    assert replace(imports, batch_triggers=1).function_names == ("product_import_tasks",)


def test_a_module_that_declares_no_pipeline_is_named() -> None:
    with pytest.raises(ValueError, match=r"tests\.builders declares no PIPELINE"):
        app_pipelines({PIPELINE_MODULES_SETTING: "tests.builders"})


def test_a_builder_that_asks_for_what_the_container_lacks_is_named() -> None:
    purchase, *_ = PIPELINES

    def build_tasks(catalog: object, stock_levels: object) -> dict[str, object]:
        return {}

    wired = Wired(purchase, build_tasks)
    with pytest.raises(TypeError, match="build_tasks asks for 'stock_levels'"):
        wired.tasks(Container(app_settings(APP_SETTINGS)))


def test_a_pipelines_processor_is_built_when_first_asked_for_and_no_other() -> None:
    # An instance that only imports never loads the purchase's PDF renderer.
    container = Container(app_settings(APP_SETTINGS))
    assert set(container.processors) == {p.name for p in PIPELINES}
    imports = container.processor("product_import")
    assert imports is container.processor("product_import")
    assert not container.built("receipt_renderer")
    assert container.processor("purchase").pipeline == "purchase"
    assert container.built("receipt_renderer")
    with pytest.raises(KeyError):
        container.processor("nobody")
