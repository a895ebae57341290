"""The dead-letter reasons the session processor gives on its own account. Tasks give their
own (``PaymentDeclined``, ``UnknownSku``, ``InvalidProduct:price``, ...)."""

from __future__ import annotations

# A message of a session that failed earlier: not run (the description names the first failure).
SESSION_FAILED = "SessionFailed"
# A step arrived whose predecessor never ran (StopOnFailure).
PREVIOUS_STEP_MISSING = "PreviousStepMissing"
# The body cannot be read as a task message of this queue's pipeline.
MALFORMED_MESSAGE = "MalformedMessage"
# The session state cannot be read: the session is treated as failed.
CORRUPT_SESSION_STATE = "CorruptSessionState"
# A task raised something that is not a TaskFailed (a bug, an SDK error), on every attempt.
UNHANDLED_ERROR = "UnhandledError"

# Not a dead-letter reason: why a message was handed back unrun (its pipeline paused, by an
# operator or by its circuit, for longer than one invocation may hold it).
PIPELINE_PAUSED = "PipelinePaused"
# Not a dead-letter reason: why a batch's message was handed back unrun (an earlier one was).
EARLIER_MESSAGE_HANDED_BACK = "EarlierMessageHandedBack"

# The reasons Service Bus itself dead-letters a message with (learn.microsoft.com, "Overview of
# Service Bus dead-letter queues", "Moving messages to the DLQ"): no processor saw the outcome,
# so the archive tells the pipeline's observer, and the job's counts stay exact.
BROKER_REASONS = frozenset(
    {
        "MaxDeliveryCountExceeded",
        "TTLExpiredException",
        "HeaderSizeExceeded",
        "Session ID is null",
        "MaxTransferHopCountExceeded",
    }
)
