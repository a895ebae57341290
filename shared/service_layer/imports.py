"""What became of the rows of a product import: recorded by the import tasks, reported
together with the Spark job's manifest."""

from __future__ import annotations

from ..domain.envelope import TaskMessage
from ..domain.import_jobs import ImportJobStatus, ManifestNotFound, import_job_status
from .ports import ImportManifests, ImportProgress
from .processor import IncomingMessage, Observer, Outcome

IMPORTED = "imported"
FAILED = "failed"


def import_progress_observer(progress: ImportProgress) -> Observer:
    """Records each row's outcome before its message is settled. A redelivery of a finished
    row records nothing; a re-recorded row overwrites itself (upsert), and so does its replay,
    so counts stay exact."""

    def observe(
        incoming: IncomingMessage,
        message: TaskMessage | None,
        outcome: Outcome,
        reason: str | None,
    ) -> None:
        if outcome is Outcome.ALREADY_DONE:
            return
        properties = incoming.application_properties
        job_id = message.job_id if message else properties.get("job_id")
        if not isinstance(job_id, str):
            return  # nothing says which import this unreadable message belonged to
        step = message.step if message else properties.get("step")
        # A replayed row (replay_of: its original session) overwrites its first outcome, so a
        # row that failed and then imported on replay counts once, as imported.
        original = properties.get("replay_of")
        progress.record(
            job_id,
            original if isinstance(original, str) and original else incoming.session_id,
            step if isinstance(step, int) and not isinstance(step, bool) else None,
            status=IMPORTED if outcome is Outcome.COMPLETED else FAILED,
            reason=reason,
        )

    return observe


def get_import_status(
    manifests: ImportManifests, progress: ImportProgress, job_id: str
) -> ImportJobStatus:
    """Rows read, rejected and sent (the manifest) and imported and failed (the tasks) of one
    job. Raises ``ImportJobNotFound`` when neither knows the job."""
    try:
        manifest = manifests.get(job_id)
    except ManifestNotFound:
        manifest = None
    return import_job_status(job_id, manifest, progress.counts(job_id))
