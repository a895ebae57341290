"""The SDKs' exceptions as the adapters raise them: an unreachable service is the app's
retryable ServiceUnavailable; a wrong configuration or a refused request stays as it is."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import MessagingEntityNotFoundError

from shared.adapters.servicebus_dead_letters import ServiceBusResender
from shared.adapters.table_order_progress import TableOrderProgress
from shared.adapters.table_products import TableProductCatalog
from shared.domain.errors import ServiceUnavailable
from shared.service_layer.ports import OutgoingMessage
from tests.outages import unreachable_service_bus, unreachable_tables

pytestmark = pytest.mark.integration


def test_table_storage_out_of_reach_is_service_unavailable() -> None:
    catalog = TableProductCatalog(unreachable_tables().get_table_client("products"))

    with pytest.raises(ServiceUnavailable) as error:
        catalog.find(["SKU-1"])

    assert error.value.retryable and error.value.service == "Table Storage"


def test_service_bus_out_of_reach_is_service_unavailable() -> None:
    with pytest.raises(ServiceUnavailable, match="Service Bus"):
        ServiceBusResender(unreachable_service_bus()).resend(
            "q", "s", [OutgoingMessage(b"{}", "m-1")]
        )


def test_a_queue_that_does_not_exist_is_a_configuration_error_left_as_it_is(
    servicebus_client: ServiceBusClient,
) -> None:
    with pytest.raises(MessagingEntityNotFoundError):
        ServiceBusResender(servicebus_client).resend(
            "no-such-queue", "s", [OutgoingMessage(b"{}", "m-1")]
        )


def test_a_request_the_service_refuses_is_left_as_it_is(table: TableClient) -> None:
    progress = TableOrderProgress(table)

    with pytest.raises(HttpResponseError) as error:
        progress.accept("job", "s" * 40_000, "t")  # a property over 64 KiB

    assert not isinstance(error.value, ServiceUnavailable)
    assert error.value.status_code is not None and error.value.status_code < 500
