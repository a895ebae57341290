"""The manifest of one import job: its schema and its table live in ``shared`` (the function
app reads them for GET /api/imports/{job_id} and its package excludes spark_jobs/); the job
imports them from there, and the wheel ships ``shared`` beside the job."""

from shared.domain.import_jobs import JobManifest, ManifestNotFound

from .clients import IMPORT_JOBS_TABLE, TableManifestStore

__all__ = ["IMPORT_JOBS_TABLE", "JobManifest", "ManifestNotFound", "TableManifestStore"]
