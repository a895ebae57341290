"""One root cause, one fingerprint: descriptions are compared with their ids, numbers and
amounts normalised, within one (queue, task, reason)."""

from __future__ import annotations

from shared.domain.archive import FailedSession, SummaryFilter
from shared.domain.fingerprints import fingerprint, normalise
from shared.service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from tests.fakes import InMemoryDeadLetterArchive

OUTAGE = (
    "Gave up after {n} attempts. Last error: The payment provider did not answer for card "
    "{card} (simulated outage). The payment will be retried; nothing was charged."
)


def _summary(
    session_id: str, reason: str, description: str, task: str = "ProcessPayment"
) -> FailedSession:
    return FailedSession(
        session_id=session_id,
        queue="purchase-tasks",
        failed_task=task,
        failed_step=3,
        reason=reason,
        description=description,
        failed_at="2026-01-01T00:00:00+00:00",
        message_count=3,
        has_last=True,
        context={},
    )


def test_numbers_amounts_and_ids_are_normalised_and_words_are_kept() -> None:
    assert normalise(OUTAGE.format(n=2, card="tok_amex_0005")) == (
        "Gave up after <n> attempts. Last error: The payment provider did not answer for card "
        "<id> (simulated outage). The payment will be retried; nothing was charged."
    )
    assert normalise("Order ORD-00000003 of 50.95 EUR, job 3f2e-11 at 2026-01-01T10:00:00Z.") == (
        "Order <id> of <n> EUR, job <id> at <id>."
    )
    assert normalise("SKU UNICORN-TEA is not in the catalogue") == (
        "SKU UNICORN-TEA is not in the catalogue"
    )


def test_the_fingerprint_ignores_variable_parts_but_not_the_group() -> None:
    first = fingerprint("q", "ProcessPayment", "Unavailable", OUTAGE.format(n=2, card="tok_1"))
    second = fingerprint("q", "ProcessPayment", "Unavailable", OUTAGE.format(n=3, card="tok_29"))
    assert first == second and len(first) == 12
    assert first != fingerprint("q", "ProcessPayment", "Other", OUTAGE.format(n=2, card="tok_1"))
    assert first != fingerprint(
        "q2", "ProcessPayment", "Unavailable", OUTAGE.format(n=2, card="t1")
    )


def test_sessions_of_one_group_split_by_root_cause_largest_first() -> None:
    archive = InMemoryDeadLetterArchive()
    for n, card in enumerate(("tok_amex_0005", "tok_amex_0017", "tok_amex_0029"), start=1):
        archive.save_summary(_summary(f"s{n}", "Unavailable", OUTAGE.format(n=2, card=card)))
    archive.save_summary(_summary("s4", "Unavailable", "The provider answered 500."))
    archive.save_summary(_summary("s5", "UnknownSku", "SKU UNICORN-TEA is missing", "Calc"))

    found = failure_fingerprints(archive, SummaryFilter(reason="Unavailable", status="failed"))

    assert [(f.sessions, f.sample) for f in found] == [(3, ("s1", "s2", "s3")), (1, ("s4",))]
    assert found[0].description.startswith("Gave up after <n> attempts")
    assert found[0].example == OUTAGE.format(n=2, card="tok_amex_0005")
    matching = sessions_with_fingerprint(
        archive, found[0].fingerprint, SummaryFilter(status="failed")
    )
    assert [s.session_id for s in matching] == ["s1", "s2", "s3"]
