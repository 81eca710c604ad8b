"""The one masking rule (`neuronforge.common.secrets.mask_credentials`) and the store's refusal that
uses it: an AWS secret with `/`, `:`, `%2F` or `@` in it is never half-shown (issue 39)."""

from __future__ import annotations

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import mask_credentials
from neuronforge.stores import open_store

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfi:CY%2FEX@AMPLEKEY"
HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # hf_ and 34 letters and digits


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"s3://AKIAEXAMPLE:{SECRET}@bucket/prefix", "s3://***@bucket/prefix"),
        (f"https://user:{SECRET}@host:9000/x", "https://***@host:9000/x"),
        # no `@` (a secret with one here would be read as the userinfo's end: nothing tells them apart)
        (f"s3://AKIAEXAMPLE:{SECRET.replace('@', '')}/bucket/x", "s3://***"),
        (f'error: profile = "s3://K:{SECRET}@b/p" is not allowed', 'error: profile = "s3://***@b/p" is not allowed'),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F1&X-Amz-Security-Token=abc&X-Amz-Signature=f0&n=1",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Security-Token=***&X-Amz-Signature=***&n=1",
        ),
        ("https://hub.example/x?token=hf_abc", "https://hub.example/x?token=***"),
        # a Hugging Face token on its own (pasted into the wrong variable, quoted back by its refusal)
        (f"NEURONFORGE_HUB_REGISTRY='{HF_TOKEN}' is not", "NEURONFORGE_HUB_REGISTRY='hf_***' is not"),
    ],
)
def test_credentials_are_masked_whatever_the_secret_holds(text: str, shown: str) -> None:
    assert mask_credentials(text) == shown
    for piece in ("K7MDENG", "bPxRfi", "AMPLEKEY", "abc", "f0", "hf_abc", HF_TOKEN[3:]):
        assert piece not in mask_credentials(text)


@pytest.mark.parametrize(
    "text",
    [
        "s3://bucket/models/tiny-llama@cdd9",  # `@` in a path is not a credential
        "http://127.0.0.1:9000/bucket/x",  # a port is not a secret
        "file:///tmp/store",
        "hf://org/name@rev",
        "builtin:tiny-llama@cdd9",
        "no hf_xet, hf_transfer or hf_hub_download_with_a_long_name",  # names, not tokens
    ],
)
def test_what_carries_no_credential_is_shown_as_it_is(text: str) -> None:
    assert mask_credentials(text) == text


def test_a_store_uri_with_a_slashy_secret_is_refused_masked() -> None:
    with pytest.raises(InvalidInput) as err:
        open_store(f"s3://AKIAEXAMPLE:{SECRET}@bucket/store")
    assert "s3://***@bucket/store carries credentials" in str(err.value)
    assert not any(piece in str(err.value) for piece in SECRET.split("/"))


def test_an_error_line_never_carries_a_credential_on_any_surface() -> None:
    """`errors.outcome` is where the CLI's `error: ...` line and a task's failure both come from: a
    message that quotes a URI with a credential (say, a library's own error text) is masked there."""
    from neuronforge.common.errors import StoreError, outcome

    exc = StoreError(f"cannot reach s3://AKIAEXAMPLE:{SECRET}@bucket/store: connection refused")
    for surface in ("cli", "form"):
        found = outcome(exc, surface=surface)
        assert found is not None and "s3://***@bucket/store" in found.line
        assert not any(piece in found.line or piece in found.message for piece in SECRET.split("/"))


def test_a_log_record_is_masked_where_it_is_made() -> None:
    """`mask_logs`' record factory: the message masked, its text arguments masked in place (their
    shape kept for formatters that read them), or the whole text when the credential straddles the
    two; an exception's traceback holding one rendered into the message masked; a record with nothing
    to mask, a message that is not text (structlog's dict) or that does not format, left as it is."""
    import logging
    import sys

    from neuronforge.common.secrets import masked_record

    def record(msg: object, args: object = (), exc_info: object = None) -> logging.LogRecord:
        return masked_record(logging.LogRecord("x", logging.WARNING, __file__, 1, msg, args, exc_info))

    uri = f"s3://AKIAEXAMPLE:{SECRET}@bucket/store"
    shown = record("cannot reach %s: %d tries", (uri, 3))
    assert shown.getMessage() == "cannot reach s3://***@bucket/store: 3 tries"
    assert shown.args == ("s3://***@bucket/store", 3)  # uvicorn's access formatter unpacks them
    assert record("%(uri)s", ({"uri": uri},)).getMessage() == "s3://***@bucket/store"
    straddling = record("s3://AKIAEXAMPLE:%s@bucket/store", (SECRET,))
    assert straddling.getMessage() == "s3://***@bucket/store" and straddling.args == ()
    untouched = ("GET %s %d", ("/x", 200))
    plain = record(*untouched)
    assert (plain.msg, plain.args) == untouched
    try:
        raise OSError(f"refused by {uri}")
    except OSError:
        failed = record("a step failed", exc_info=sys.exc_info())
    assert failed.exc_info is None and failed.getMessage().startswith("a step failed\nTraceback")
    assert "OSError: refused by s3://***@bucket/store" in failed.getMessage()
    assert not any(piece in failed.getMessage() for piece in SECRET.split("/"))
    try:
        raise OSError("no credential here")
    except OSError:
        own = record("a step failed", exc_info=sys.exc_info())
    assert own.exc_info is not None and own.msg == "a step failed"  # a structured traceback stays one
    event = {"event": uri}
    assert record(event).msg is event
    assert record("%d tries", ("many",)).msg == "%d tries"  # its handler reports the bad format


def test_a_progress_step_is_shown_masked() -> None:
    """A step's description is drawn by rich's display, no log record: `progress.step` masks it, for
    every reporter."""
    from contextlib import contextmanager

    from neuronforge.common import progress

    seen: list[str] = []

    class Seeing(progress.Reporter):
        @contextmanager
        def step(self, what, total=None, unit="B", logger=None, own_bars=False):  # type: ignore[override]
            seen.append(what)
            yield progress.Step(what, total, unit)

    old = progress.use(Seeing())
    try:
        with progress.step(f"downloading https://user:{SECRET}@hub.example/org/m"):
            pass
    finally:
        progress.use(old)
    assert seen == ["downloading https://***@hub.example/org/m"]
