"""The JSON documents of the operator's API (``failed_sessions_http``, ``overview_http``),
built from the services' results."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..domain.audit import AuditEntry
from ..domain.confirmations import Preview
from ..domain.pauses import Paused
from ..service_layer.history import SessionHistory
from ..service_layer.overview import Overview
from ..service_layer.resolve import Resolution


def history_view(history: SessionHistory) -> dict[str, Any]:
    """The history as it is, but for the resolution: when and under which key, not the whole
    claim."""
    resolved = history.resolved
    resolution = {"at": resolved.claimed_at, "idempotency_key": resolved.key} if resolved else None
    return {**asdict(history), "resolved": resolution}


def audit_entry_view(entry: AuditEntry) -> dict[str, Any]:
    """An audit entry as recorded: who, with which role, when, why, the new session, the
    request's key and each edit's JSON diff."""
    return asdict(entry)


def resolution_view(resolution: Resolution) -> dict[str, Any]:
    return {**asdict(resolution), "status": "resolved"}


def preview_view(preview: Preview) -> dict[str, Any]:
    """The confirmation without its digest (which sessions it counted is the server's to
    check), and the groups."""
    promised = {k: v for k, v in asdict(preview.confirmation).items() if k != "digest"}
    return {**promised, "groups": [asdict(group) for group in preview.groups]}


def overview_view(overview: Overview) -> dict[str, Any]:
    """What could not be read is null; ``unavailable`` names the services out of reach."""
    imports = overview.imports
    return {
        "orders": asdict(overview.orders) if overview.orders is not None else None,
        "imports_in_progress": [asdict(job) for job in imports] if imports is not None else None,
        "failed_sessions": overview.failed,
        "replayed_sessions": overview.replayed,
        "resolved_sessions": overview.resolved,
        "dead_letters_waiting": overview.waiting,
        "pipelines": [
            {**asdict(counts), "paused": pause_view(counts.paused)} for counts in overview.pipelines
        ],
        "failure_groups": [asdict(group) for group in overview.groups],
        "unavailable": list(overview.unavailable),
        "alerts": [asdict(alert) for alert in overview.alerts],
    }


def pause_view(paused: Paused | None) -> dict[str, Any] | None:
    """A pipeline's pause: ``cause`` circuit (``dependency`` out of reach ``since``) or
    manual (``by`` whom, ``note``), and ``summary``, one line for a person."""
    if paused is None:
        return None
    return {
        "cause": paused.cause,
        "since": paused.since,
        "dependency": paused.dependency,
        "by": paused.by,
        "note": paused.note,
        "summary": paused.summary,
    }
