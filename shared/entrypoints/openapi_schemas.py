"""The parts of the OpenAPI document (``openapi``) its operations share: the Idempotency-Key
header, the RFC 9457 problem document, and the generic job API's answers."""

from __future__ import annotations

from typing import Any

IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "description": "1 to 255 printable ASCII characters: a repeat with the same body gets the "
    "first answer and does nothing, the key with another body is a 422, a repeat while the "
    "first runs is a 409 (README.md, 'Idempotency-Key')",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}
PROBLEM = {
    "description": "RFC 9457 problem document: errors name the field and its limit",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
}
SCHEMAS: dict[str, Any] = {
    "Problem": {
        "type": "object",
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "problem": {"type": "string"}},
                },
            },
        },
        "required": ["title", "status", "detail"],
    },
    "StartedJob": {
        "type": "object",
        "properties": {
            "job_id": {"type": "string"},
            "session_id": {"type": "string"},
            "queue_name": {"type": "string"},
            "tasks": {"type": "array", "items": {"type": "string"}},
            "status": {"const": "accepted"},
            "status_url": {"type": "string"},
        },
        "required": ["job_id", "session_id", "tasks", "status", "status_url"],
    },
    "JobStatus": {
        "type": "object",
        "properties": {
            "job_id": {"type": "string"},
            "pipeline": {"type": "string"},
            "status": {"enum": ["accepted", "completed", "failed"]},
            "reason": {"type": ["string", "null"]},
            "tasks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "task": {"type": "string"},
                        "step": {"type": "integer"},
                        "state": {"enum": ["pending", "completed", "failed", "not-run"]},
                    },
                },
            },
            "failed": {
                "type": ["object", "null"],
                "properties": {
                    "task": {"type": "string"},
                    "step": {"type": ["integer", "null"]},
                    "reason": {"type": "string"},
                    "description": {"type": "string"},
                    "at": {"type": "string"},
                },
            },
            "outputs": {"type": "object"},
            "sessions": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["job_id", "pipeline", "status", "tasks", "sessions"],
    },
}
