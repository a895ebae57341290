"""An operator's actions on failed sessions, bound once to the ports they use: the console and
the JSON API both call this, so they differ only in how they read a request and answer it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..domain.confirmations import Preview, Selection
from ..domain.pipelines import Pipelines
from ..domain.replays import BulkAction, ReplayRequest
from ..service_layer.bulk_actions import confirm_bulk_action, preview_bulk_action
from ..service_layer.idempotency import IdempotentRequests
from ..service_layer.operator_actions import edit_and_replay, replay_for_operator
from ..service_layer.operator_ports import AuditTrail, Confirmations, ReplayPorts
from ..service_layer.ports import (
    DeadLetterArchive,
    MessageResender,
    ReplayQueue,
    ReplayRequestStore,
    SessionSeeder,
)
from ..service_layer.replay import ReplayResult
from ..service_layer.resolve import Resolution, resolve_session


@dataclass(frozen=True)
class Ask:
    """One operator's request: its Idempotency-Key, who sent it and why (the note), and the
    role they sent it with (the audit trail records it)."""

    key: str
    who: str
    note: str | None
    role: str = ""


@dataclass(frozen=True)
class OperatorDesk:
    archive: DeadLetterArchive
    resender: MessageResender
    seeder: SessionSeeder
    audit: AuditTrail
    requests: IdempotentRequests
    confirmations: Confirmations
    replay_requests: ReplayRequestStore
    replay_queue: ReplayQueue
    pipelines: Pipelines

    @property
    def _replay_ports(self) -> ReplayPorts:
        return ReplayPorts(self.archive, self.resender, self.seeder, self.audit)

    def replay(self, session_id: str, ask: Ask, *, force: bool = False) -> ReplayResult:
        """``replay_for_operator``: replay the session as archived, audited."""
        return replay_for_operator(
            *self._replay_ports,
            session_id,
            key=ask.key,
            who=ask.who,
            note=ask.note or "",
            role=ask.role,
            force=force,
            requests=self.requests,
            pipelines=self.pipelines,
        )

    def edit_and_replay(self, session_id: str, edited: Mapping[str, str], ask: Ask) -> ReplayResult:
        """``edit_and_replay``: replay the session with some bodies replaced, audited."""
        return edit_and_replay(
            *self._replay_ports,
            session_id,
            edited,
            key=ask.key,
            who=ask.who,
            note=ask.note,
            role=ask.role,
            requests=self.requests,
            pipelines=self.pipelines,
        )

    def resolve(self, session_id: str, ask: Ask) -> Resolution:
        """``resolve_session``: mark the session resolved without a replay, audited."""
        return resolve_session(
            self.archive,
            self.audit,
            session_id,
            ask.key,
            who=ask.who,
            note=ask.note,
            role=ask.role,
            requests=self.requests,
        )

    def preview_bulk(self, action: BulkAction, selection: Selection) -> Preview:
        """``preview_bulk_action``: what a bulk action would touch, and its token."""
        return preview_bulk_action(self.archive, self.confirmations, action, selection)

    def confirm_bulk(
        self, action: BulkAction, token: str, *, who: str, note: str | None, role: str = ""
    ) -> ReplayRequest:
        """``confirm_bulk_action``: queue the bulk action the token confirms."""
        return confirm_bulk_action(
            self.archive,
            self.confirmations,
            self.replay_requests,
            self.replay_queue,
            action,
            token,
            who=who,
            note=note,
            role=role,
        )
