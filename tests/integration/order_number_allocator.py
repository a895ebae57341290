"""An allocator process for the order-number tests: allocates a number for each job id read
from stdin (one a line, in that order) with the chosen mode, and prints ``<job id> <number>``
as soon as each one is allocated. A test can kill it at any line (kill -9) and check what it
left in the table.

    python -m tests.integration.order_number_allocator CONNECTION_STRING TABLE BLOCK_SIZE
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from azure.data.tables import TableClient

from shared.adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers


def allocator(table: TableClient, block_size: int) -> TableOrderNumbers | TableBlockOrderNumbers:
    if block_size:
        return TableBlockOrderNumbers(table, block_size=block_size)
    return TableOrderNumbers(table)


def main(argv: list[str]) -> int:
    connection_string, table_name, block_size = argv[0], argv[1], int(argv[2])
    threads = int(argv[3]) if len(argv) > 3 else 4
    numbers = allocator(
        TableClient.from_connection_string(connection_string, table_name), block_size
    )
    jobs = [line.strip() for line in sys.stdin if line.strip()]

    printing = threading.Lock()

    def allocate(job: str) -> None:
        number = numbers.allocate(job)
        with printing:  # one whole line at a time
            sys.stdout.write(f"{job} {number}\n")
            sys.stdout.flush()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(allocate, jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
