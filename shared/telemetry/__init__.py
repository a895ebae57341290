"""OpenTelemetry for the pipelines: one trace per order across its HTTP request and its tasks.

- ``setup``: what this worker process exports (Azure Monitor, OTLP/HTTP, or nothing), decided
  once from the environment;
- ``context``: W3C trace context on Service Bus messages, the way the azure-servicebus SDK
  carries it;
- ``tasks``: each task invocation a span in its order's trace, and the pipeline's metrics
  (``metrics``).

With nothing to export, no SDK is loaded and every entry point here returns at its first check.
docs/telemetry.md says what is exported and how to look at it.
"""
