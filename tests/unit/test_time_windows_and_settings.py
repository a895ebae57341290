"""Times a caller gives, read as the app writes times; and the settings of this wave: the API's
public base, the lifetimes, the alert thresholds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.config import ConfigurationError
from shared.domain.errors import InvalidInput
from shared.domain.retention import Lifetimes
from shared.domain.time_windows import time_window, utc_time, within
from tests.builders import APP_SETTINGS, app_settings


def test_a_time_with_an_offset_is_written_as_the_app_writes_times() -> None:
    assert utc_time("t", "2026-11-23T10:00:00+01:00") == "2026-11-23T09:00:00+00:00"
    assert utc_time("t", "2026-11-23T09:00Z") == datetime(2026, 11, 23, 9, tzinfo=UTC).isoformat()
    assert utc_time("t", "2026-11-23T09:00", assume_utc=True) == "2026-11-23T09:00:00+00:00"
    for bad in ("2026-11-23T09:00", "yesterday", ""):
        with pytest.raises(InvalidInput, match=r"^t: "):
            utc_time("t", bad)


def test_a_window_s_end_comes_after_its_start_and_either_may_be_open() -> None:
    assert time_window(None, "2026-11-23T09:00Z") == (None, "2026-11-23T09:00:00+00:00")
    with pytest.raises(InvalidInput, match=r"^failed_to: must be after"):
        time_window("2026-11-23T09:00Z", "2026-11-23T09:00Z")
    inside = within("2026-11-23T09:00:00+00:00", "2026-11-23T10:00:00+00:00")
    assert inside("2026-11-23T09:00:00+00:00") and inside("2026-11-23T09:59:59.999999+00:00")
    assert not inside("2026-11-23T10:00:00+00:00") and not inside(None)
    assert within(None, None)(None)


def test_the_settings_of_urls_lifetimes_and_alerts() -> None:
    settings = app_settings(
        {
            **APP_SETTINGS,
            "PUBLIC_BASE_URL": "https://shop.example.com/",
            "RETENTION_JOBS_DAYS": "0",
            "RETENTION_AUDIT_DAYS": "730",
            "ALERT_FAILED_SESSIONS_THRESHOLD": "3",
        }
    )
    assert settings.public_base_url == "https://shop.example.com"
    assert settings.retention == Lifetimes(jobs=0, audit=730)
    assert settings.retention.cutoff("jobs", datetime.now(UTC)) is None  # kept for good
    assert settings.alerts.failed_sessions_threshold == 3
    for bad in ("shop.example.com", "ftp://shop.example.com", "https://x.example/?a=1"):
        with pytest.raises(ConfigurationError, match="PUBLIC_BASE_URL"):
            app_settings({**APP_SETTINGS, "PUBLIC_BASE_URL": bad})
    with pytest.raises(InvalidInput, match="RETENTION_AUDIT_DAYS"):
        app_settings({**APP_SETTINGS, "RETENTION_AUDIT_DAYS": "-1"})
