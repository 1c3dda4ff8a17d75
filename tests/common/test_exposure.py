"""Which start-up set-ups get an exposure warning."""

from __future__ import annotations

import pytest

from common.exposure import exposure_warnings, is_loopback_bind


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LocalHost.",
                                  "app.localhost", "::ffff:127.0.0.1"])
def test_loopback_binds(host: str) -> None:
    assert is_loopback_bind(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.5", "wiki.example.internal",
                                  "::ffff:10.0.0.1", "localhost.example.com"])
def test_binds_reachable_from_elsewhere(host: str) -> None:
    assert not is_loopback_bind(host)


def events(*args: str, **kwargs: bool) -> list[str]:
    return [w.event for w in exposure_warnings(*args, **kwargs)]


def test_a_loopback_service_is_quiet() -> None:
    assert events("127.0.0.1", drafts=True) == []


def test_each_exposure_is_one_warning() -> None:
    assert events("0.0.0.0", any_host=True, drafts=True) == [
        "public_bind", "any_host_allowed", "drafts_on_public_bind"]


def test_any_host_on_loopback_is_still_warned_about() -> None:
    # Loopback is what a rebinding page in the operator's own browser reaches.
    assert events("127.0.0.1", any_host=True) == ["any_host_allowed"]


def test_the_services_own_public_rule_wins() -> None:
    assert events("wiki.internal", public_bind=False) == []
    assert events("127.0.0.1", public_bind=True) == ["public_bind"]


def test_the_message_names_the_address() -> None:
    [warning] = exposure_warnings("192.168.1.5")
    assert "192.168.1.5" in warning.message
