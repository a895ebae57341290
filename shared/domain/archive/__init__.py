"""Dead letters at rest, and the failed sessions they belong to, by what they hold:
``messages`` (the archived rows and their statuses), ``summaries`` (a failed session as an
operator sees it, and the filters that list them), ``claims`` (the one replay or resolution a
session gets), ``errors`` (what the archive refuses). Every name is importable from here too."""

from .claims import (
    REPLAY,
    RESOLVE,
    ReplayClaim,
    replay_session_id,
    status_with,
)
from .errors import (
    AlreadyReplayed,
    AlreadyResolved,
    ClaimedElsewhere,
    ReplayIncomplete,
    SessionNotArchived,
    claimed_elsewhere,
)
from .messages import (
    FAILED,
    REPLAYED,
    RESOLVED,
    ArchivedMessage,
    MessageCopy,
    Status,
    pipeline_of,
    routing_of,
    row_key,
)
from .summaries import (
    ANY_STATUS,
    STATUS_CHOICES,
    FailedSession,
    FailureRecord,
    GroupKey,
    SummaryFilter,
    status_filter,
    summarize,
)

__all__ = [
    "ANY_STATUS",
    "FAILED",
    "REPLAY",
    "REPLAYED",
    "RESOLVE",
    "RESOLVED",
    "STATUS_CHOICES",
    "AlreadyReplayed",
    "AlreadyResolved",
    "ArchivedMessage",
    "ClaimedElsewhere",
    "FailedSession",
    "FailureRecord",
    "GroupKey",
    "MessageCopy",
    "ReplayClaim",
    "ReplayIncomplete",
    "SessionNotArchived",
    "Status",
    "SummaryFilter",
    "claimed_elsewhere",
    "pipeline_of",
    "replay_session_id",
    "routing_of",
    "row_key",
    "status_filter",
    "status_with",
    "summarize",
]
