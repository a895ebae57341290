"""host.json options and %SETTING% resolution, read as the Functions host reads them."""

from __future__ import annotations

import pytest

from functions_local_host.config import HostConfigurationError, HostOptions, resolve, timespan
from functions_local_host.routes import RouteTemplate


def test_service_bus_options_read_the_flat_5x_layout() -> None:
    options = HostOptions.from_host_json(
        {
            "extensions": {
                "serviceBus": {
                    "maxConcurrentSessions": 3,
                    "maxConcurrentCalls": 5,
                    "sessionIdleTimeout": "00:00:07",
                    "maxAutoLockRenewalDuration": "00:10:00",
                    "autoCompleteMessages": False,
                },
                "http": {"routePrefix": ""},
                "queues": {"batchSize": 2, "maxDequeueCount": 7, "visibilityTimeout": "00:00:03"},
            }
        }
    ).service_bus
    assert (options.max_concurrent_sessions, options.max_concurrent_calls) == (3, 5)
    assert (options.session_idle_timeout, options.max_auto_lock_renewal_duration) == (7, 600)
    assert options.auto_complete_messages is False


def test_service_bus_options_also_read_the_4x_session_handler_options() -> None:
    options = HostOptions.from_host_json(
        {
            "extensions": {
                "serviceBus": {
                    "sessionHandlerOptions": {
                        "maxConcurrentSessions": 2,
                        "messageWaitTimeout": "00:00:05",
                        "maxAutoRenewDuration": "00:01:00",
                        "autoComplete": False,
                    }
                }
            }
        }
    )
    sb = options.service_bus
    assert (sb.max_concurrent_sessions, sb.session_idle_timeout) == (2, 5)
    assert (sb.max_auto_lock_renewal_duration, sb.auto_complete_messages) == (60, False)
    assert options.route_prefix == "api"
    assert options.queues.max_dequeue_count == 5


def test_defaults_and_timespans() -> None:
    options = HostOptions.from_host_json({"version": "2.0"})
    assert options.service_bus.auto_complete_messages is True
    assert options.queues.message_encoding == "base64"
    assert timespan("1.02:03:04.5", 0) == 93784.5
    with pytest.raises(HostConfigurationError):
        timespan("5 minutes", 0)


def test_setting_references_resolve_or_fail_by_name() -> None:
    assert resolve("%Q%-x", {"Q": "orders"}) == "orders-x"
    with pytest.raises(HostConfigurationError, match="MISSING"):
        resolve("%MISSING%", {})


ZERO_GUID = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize(
    ("template", "path", "expected"),
    [
        ("items/{id:int}", "items/42", {"id": "42"}),
        ("items/{id:int}", "items/x", None),
        ("Items/{id}", "items/a", {"id": "a"}),
        ("a/{b?}", "a", {}),
        ("a/{b?}", "a/c/d", None),
        ("files/{*rest}", "files/x/y", {"rest": "x/y"}),
        ("x/{n:alpha:minlength(2)}", "x/ab", {"n": "ab"}),
        ("x/{n:alpha:minlength(2)}", "x/a", None),
        (
            "x/{g:guid}",
            "x/00000000-0000-0000-0000-000000000000",
            {"g": "0" * 8 + "-0000" * 3 + "-" + "0" * 12},
        ),
    ],
)
def test_route_templates(template: str, path: str, expected: dict[str, str] | None) -> None:
    assert RouteTemplate(template).match(path) == expected
