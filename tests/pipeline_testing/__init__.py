"""What a pipeline's end-to-end test needs, so that the test is its scenario alone: the stack
as ``make up`` runs it (``stack``), jobs started and followed through the generic job API
(``jobs``), and the archive, the history and the replays from the API and the console
(``replays``).

    from tests.pipeline_testing import PipelineStack, pipeline_stack, start, status_when

    stack = pipeline_stack()  # a module's stack fixture, on free ports, killed at the end

    def test_a_job_completes(stack: PipelineStack) -> None:
        started = start(stack.api, "onboardings", {...})
        assert status_when(stack.api, started, "completed")["tasks"][0]["state"] == "completed"
"""

from .jobs import start, status_when, tasks_run
from .replays import archived, history_says, replay_from_the_api, replay_from_the_console
from .stack import PipelineStack, pipeline_stack

__all__ = [
    "PipelineStack",
    "archived",
    "history_says",
    "pipeline_stack",
    "replay_from_the_api",
    "replay_from_the_console",
    "start",
    "status_when",
    "tasks_run",
]
