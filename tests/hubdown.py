"""The Hugging Face Hub unreachable, for tests of the commands that read it."""

from __future__ import annotations

import socket

import pytest


def closed_endpoint() -> str:
    """A local endpoint nothing listens on: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def hub_at(endpoint: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """Point huggingface_hub (already imported: its constants are read at import) at `endpoint`,
    online (the suite runs with HF_HUB_OFFLINE=1), for the rest of the test."""
    from huggingface_hub import constants
    from huggingface_hub.utils._http import reset_sessions

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    reset_sessions()  # a session cached while offline keeps refusing every request
    request.addfinalizer(reset_sessions)  # and the next test's session is built offline again
    return endpoint
