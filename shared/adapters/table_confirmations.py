"""Confirmation tokens of bulk previews in Table Storage (table ``confirmations``): one entity
per token. Redeeming marks it redeemed under its ETag, so a token confirms one action only, even
when two requests present it at once (the second one's write fails with 412)."""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.confirmations import BulkAction, Confirmation, ConfirmationRefused, Selection
from .azure_errors import TABLE_STORAGE, translated

CONFIRMATIONS_TABLE = "confirmations"
_PARTITION = "confirmation"
# The selection's fields a release before time windows knows, written even when empty.
_FIELDS = ("queue", "task", "reason", "fingerprint")
_UNKNOWN = (
    "This confirmation token is unknown or was already used: preview the action again and "
    "confirm with the token the preview returns."
)


class TableConfirmations:
    """Implements Confirmations."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def issue(
        self, action: BulkAction, selection: Selection, sessions: int, digest: str, expires_at: str
    ) -> Confirmation:
        confirmation = Confirmation(
            secrets.token_urlsafe(24), action, selection, sessions, digest, expires_at
        )
        self._table.create_entity(
            {
                "PartitionKey": _PARTITION,
                "RowKey": confirmation.token,
                "action": action,
                # A window only when set: a release before windows reads the rest as it wrote
                # it, and refuses (rather than widens) a selection by window.
                "selection": json.dumps(
                    {k: v for k, v in asdict(selection).items() if v is not None or k in _FIELDS}
                ),
                "sessions": sessions,
                "digest": digest,
                "expires_at": expires_at,
            }
        )
        return confirmation

    @translated(TABLE_STORAGE)
    def redeem(self, token: str) -> Confirmation:
        """The token's confirmation, marked redeemed so that it confirms nothing else. Raises
        ``ConfirmationRefused`` when it is unknown or already redeemed."""
        if not token or len(token) > 64 or not token.replace("-", "").replace("_", "").isalnum():
            raise ConfirmationRefused(_UNKNOWN)
        try:
            entity = self._table.get_entity(_PARTITION, token)
            if entity.get("redeemed"):
                raise ConfirmationRefused(_UNKNOWN)
            self._table.update_entity(
                {"PartitionKey": _PARTITION, "RowKey": token, "redeemed": True},
                mode=UpdateMode.MERGE,
                etag=entity.metadata["etag"],
                match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceNotFoundError, ResourceModifiedError) as error:
            raise ConfirmationRefused(_UNKNOWN) from error
        return _confirmation(entity)


def _confirmation(entity: Any) -> Confirmation:
    return Confirmation(
        token=entity["RowKey"],
        action=entity["action"],
        selection=Selection(**json.loads(entity["selection"])),
        sessions=int(entity["sessions"]),
        digest=entity["digest"],
        expires_at=entity["expires_at"],
    )
