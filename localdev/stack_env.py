"""What a user of a running ``make up`` needs, in one block they can copy: where the API is and
its key, the connection strings, the emulator's status URLs, the SMTP sink, the logs, and the
``export`` lines for another shell (the Spark job reads its connections from the environment).
The export lines are also written to ``.data/stack.env`` for ``. .data/stack.env``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from localdev.stack import LocalStack
from localdev.stack_layout import shown
from shared.config import SERVICE_BUS_CONNECTION, STORAGE_CONNECTION
from shared.telemetry.setup import CONNECTION_STRING, OTLP_ENDPOINT


def exports(stack: LocalStack) -> dict[str, str]:
    """The variables another shell needs: ``API`` and ``KEY`` for curl, the two connections
    under the setting names the app and the Spark job read, Spark's local settings (its
    Python workers run the venv's interpreter, which has the Azure SDKs), and where telemetry
    goes when the stack's app sends it somewhere (so the Spark job's trace joins the app's)."""
    telemetry = {
        name: value
        for name in (OTLP_ENDPOINT, CONNECTION_STRING)
        if (value := stack.settings.get(name) or os.environ.get(name))
    }
    return {
        "API": stack.api_url,
        "KEY": stack.function_key,
        STORAGE_CONNECTION: stack.storage_connection_string,
        SERVICE_BUS_CONNECTION: stack.servicebus_connection_string,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        **telemetry,
    }


def export_lines(stack: LocalStack) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in exports(stack).items()]


def write_env_file(stack: LocalStack, path: Path) -> None:
    path.write_text(
        "# Written by `make up` at start: the running stack's addresses. Load with: . "
        f"{shown(path)}\n" + "\n".join(export_lines(stack)) + "\n"
    )


def summary(stack: LocalStack) -> str:
    """The block ``make up`` prints once everything is up."""
    status = stack.emulator.http_url
    keys = stack.host.function_keys
    lines = [
        "",
        "The local stack is up.",
        f"  API           {stack.api_url}/  (x-functions-key: the host key, $KEY below)",
        f"  Host key      {keys.host}  (the API's key, and the one to sign in to the console)",
        f"  Master key    {keys.master}  (admin: the host's own endpoints)",
        f"  Host status   {stack.host.http_url}/admin/host/status  (with the master key: the "
        "worker processes, their restarts and last exit)",
        f"  Console       {stack.console_url}  (sign in with the host key)",
        f"  Storage       {stack.storage_connection_string}",
        f"  Service Bus   {stack.servicebus_connection_string}",
        f"  Emulator      {status}/health  {status}/queues  (messages per queue)",
        f"  E-mail        {stack.email.endpoint}  (Communication Services Email, as the app "
        "sends receipts in Azure; kept, not sent: one [email] line each below)",
        f"  SMTP sink     {stack.mail.host}:{stack.mail.port}  (for EMAIL_SENDER=smtp: one [smtp] "
        "line each)",
    ]
    if stack.data is not None:
        lines += [
            f"  Logs          {shown(stack.data.host_log)} (the host's lines below), "
            f"{shown(stack.data.logs)}/servicebus.log, {shown(stack.data.logs)}/azurite.log",
            f"  Data          {shown(stack.data.root)}/  (kept across restarts; `make reset` "
            "deletes it)",
            "",
            f"For another shell (or: . {shown(stack.data.env_file)}):",
        ]
    else:
        lines += ["", "For another shell:"]
    lines += [*export_lines(stack), "", "Press Ctrl+C to stop everything."]
    return "\n".join(lines)
