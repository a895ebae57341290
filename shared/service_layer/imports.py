"""A product import job's status: the Spark job's manifest together with what the import
tasks recorded of its rows (``observers.import_progress_observer``)."""

from __future__ import annotations

from ..domain.import_jobs import ImportJobStatus, ManifestNotFound, import_job_status
from .ports import ImportManifests, ImportProgress


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
