"""Replay a failed session: send its archived messages again, in the original order, under a
new session id seeded with the failed session's context. One replay per failed session: it
claims the session's summary (optimistic concurrency) before anything is sent.

A purchase session stops at its first failure, so every later message is dead-lettered too:
its replay waits until the archive holds the session's last message. An import session goes
on past a bad row: its archive holds only the bad rows, each standing alone, and they are
replayed as they are, the last one sent marked ``is_last`` so that it clears the new session's
state (docs/dead-letters.md, "Import sessions")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

from ..domain.archive import (
    REPLAY,
    REPLAYED,
    AlreadyReplayed,
    ArchivedMessage,
    ReplayClaim,
    ReplayIncomplete,
    SessionNotArchived,
    claimed_elsewhere,
    pipeline_of,
    replay_session_id,
    summarize,
)
from ..domain.envelope import marked_last
from ..domain.errors import InvalidInput
from ..domain.idempotency import fingerprint
from ..domain.pipelines import FailurePolicy, Pipelines
from ..domain.session_state import SessionState
from ..telemetry.operations import count_replayed, operation_span
from .clock import Clock, utc_now
from .idempotency import IdempotentRequests
from .ports import DeadLetterArchive, MessageResender, OutgoingMessage, SessionSeeder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplayResult:
    session_id: str
    new_session_id: str
    queue: str
    sent: int  # 0 when a repeated request found everything already sent
    job_id: str | None = None
    pipeline: str | None = None


def replay_session(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    session_id: str,
    idempotency_key: str,
    *,
    pipelines: Pipelines,
    force: bool = False,
    bodies: Mapping[str, bytes] | None = None,
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> ReplayResult:
    """Send the session's archived messages that are not replayed yet, in send order, under
    ``replay_session_id(session_id, idempotency_key)``; repeating it sends nothing twice.
    ``bodies`` (row key -> body) replaces the bodies of edited messages in what is sent; the
    archive keeps the originals.

    Before sending, the replay claims the session's summary under its key: the first key to
    claim it is the only one that ever sends; any other key is refused with ``AlreadyReplayed``
    naming the replay that holds the session. ``pipelines``: the declared ones, whose failure
    policy says whether the whole session is replayed (an unknown pipeline's is). A session
    of a pipeline that stops on failure (purchase) is refused with ``ReplayIncomplete`` until
    its last message is archived, unless ``force``; an import session never is. Raises
    ``SessionNotArchived`` too.

    With ``requests``, the Idempotency-Key rules apply too: a repeat of a finished request
    gets its result again (nothing is sent), the key with another ``force`` or other
    ``bodies`` is refused (``IdempotencyKeyReused``), a repeat while the first is in flight is
    refused (``IdempotencyKeyInFlight``). Keys are per session: the same key may replay another."""

    def replay() -> ReplayResult:
        return _replay(
            archive,
            resender,
            seeder,
            session_id,
            idempotency_key,
            pipelines.policy,
            force,
            bodies or {},
            clock,
        )

    if requests is None:
        return replay()
    # Edits are part of the request: the same key with other edits is another request.
    edits = {key: body.hex() for key, body in sorted((bodies or {}).items())}
    stored = requests.run(
        f"replay:{session_id}",
        idempotency_key,
        fingerprint(force, edits) if edits else fingerprint(force),
        lambda: asdict(replay()),
    )
    return ReplayResult(**stored)


def _replay(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    session_id: str,
    idempotency_key: str,
    policy_of: Callable[[str | None], FailurePolicy],
    force: bool,
    bodies: Mapping[str, bytes],
    clock: Clock,
) -> ReplayResult:
    if not idempotency_key.strip():
        raise InvalidInput("Idempotency-Key", "is required: any unique string, e.g. a UUID")
    rows = archive.list_session(session_id)
    if not rows:
        raise SessionNotArchived(session_id)
    pipeline = pipeline_of(rows)
    whole_session = policy_of(pipeline) is FailurePolicy.STOP_ON_FAILURE
    if whole_session and not force and not any(row.is_last for row in rows):
        raise ReplayIncomplete(session_id, len(rows))
    new_session_id = replay_session_id(session_id, idempotency_key)
    claim = archive.claim_replay(
        session_id, ReplayClaim(idempotency_key, new_session_id, clock().isoformat())
    )
    if not claim.holds(idempotency_key, REPLAY):
        raise claimed_elsewhere(session_id, claim)
    elsewhere = [r for r in rows if r.status == REPLAYED and r.replay_key != idempotency_key]
    if elsewhere:  # rows replayed before claims were recorded
        raise AlreadyReplayed(
            session_id,
            ReplayClaim(
                elsewhere[0].replay_key or "",
                elsewhere[0].replayed_session_id or "",
                elsewhere[0].replayed_at or "",
            ),
        )

    queue = rows[0].queue
    pending = [row for row in rows if row.status != REPLAYED]
    record = archive.find_record(session_id)
    if pending:
        if len(pending) == len(rows):
            # Start the new session where the failed one stopped, knowing what it knew. An
            # import session is seeded too: with no state, the processor would take a retried
            # is_last row for one that already ran and cleared the state.
            seed = SessionState(
                next_step=rows[0].step or 1,
                context=dict(record.context) if record else {},
            )
            seeder.seed(queue, new_session_id, seed.to_bytes())
        # The bad rows of an import seldom include its last: the last archived row closes the
        # new session. Not a purchase: its later messages may still reach the archive.
        closing = None if whole_session else rows[-1].row_key
        with operation_span(
            "replay session",
            attributes={
                "session.id": session_id,
                "replay.session_id": new_session_id,
                "replay.messages_edited": len(bodies),
            },
            replaying=[row.application_properties for row in pending],
        ):
            # Sent in this span: the new session's tasks are in the replay's trace, which
            # links to the failed session's.
            resender.resend(
                queue,
                new_session_id,
                [
                    _outgoing(
                        replace(row, body=bodies.get(row.row_key, row.body)),
                        session_id,
                        new_session_id,
                        last=row.row_key == closing,
                    )
                    for row in pending
                ],
            )
        count_replayed(len(pending), queue=queue)
        at = clock().isoformat()
        archive.mark_replayed(
            [row.replayed(session_id=new_session_id, key=idempotency_key, at=at) for row in pending]
        )
        logger.info(
            "Replayed %d message(s) of session %s as %s on %s",
            len(pending),
            session_id,
            new_session_id,
            queue,
        )
    # Also when nothing was pending: a run that died after marking the rows left it stale.
    rows_now = archive.list_session(session_id, bodies=False)
    archive.save_summary(summarize(session_id, rows_now, record))
    job_id = next((row.job_id for row in rows if row.job_id), None)
    return ReplayResult(session_id, new_session_id, queue, len(pending), job_id, pipeline)


def _outgoing(
    row: ArchivedMessage, session_id: str, new_session_id: str, *, last: bool
) -> OutgoingMessage:
    properties = {**row.application_properties, "replay_of": session_id}
    if last:
        properties["is_last"] = True
    return OutgoingMessage(
        body=marked_last(row.body) if last else row.body,
        # Deterministic: a repeated request is dropped by duplicate detection.
        message_id=f"{new_session_id}:{row.row_key}",
        content_type=row.content_type,
        application_properties=properties,
    )
