"""The one rule for showing text that may carry a credential: a URI's userinfo, the credentials of a
presigned URL's query string and a Hugging Face token become `***`, wherever the text is shown. Two
rules used to exist and both stopped at the first `/`, which an AWS secret access key often contains
(issue 39).

- userinfo: in `scheme://USER:SECRET@host/...` everything up to the last `@` whose prefix starts with
  `USER:` (a user part without `/`, followed by a `:` that is not a port) is masked, whatever the
  secret holds (`/`, `:`, `%2F`, `@`). When in doubt more is masked, never less.
- `scheme://USER:SECRET/...` without `@` (a form users paste for S3): the whole location is masked.
- query strings: `X-Amz-Credential`, `X-Amz-Signature`, `X-Amz-Security-Token`, `token` (any case)
  keep their names, lose their values.
- a Hugging Face access token standing on its own (`hf_` and 30 or more letters and digits: a token
  pasted into the wrong variable, quoted back by the error that refuses it) keeps its `hf_` only.

Where it runs (issue 51: one place per surface, never a call sprinkled beside each message):

- every log record of a process whose edge called `mask_logs` (the CLI's `main`, `make demo`, the
  Airflow layer `neuronforge_airflow` and the plugins on import): its message is masked when the
  record is made, whichever handler shows it (a terminal, a task log, pytest's capture);
- every line the CLI prints for a person (`print_line`: `error: …`, `warning: …`, an interrupt's
  line) and everything its argument parser prints (`--help` shows the effective store and profile);
- `errors.outcome`, where the CLI's error line and every DAG task's failure come from; the settings'
  own refusals (`settings.current`), which quote the value they refuse; the catalog's error pages and
  JSON errors; the trigger middleware's sentences.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from typing import IO, Any

MASK = "***"
# A URI: scheme:// then its location up to whitespace, a quote, a backslash or a bracket.
_URI = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s\"'\\<>()\[\]{}]*)")
# `user:` where user has no `/` or `@` and the rest is not a port (digits up to `/` or the end).
_USERINFO = re.compile(r"^[^/@:]*:(?!\d*(?:/|$))")
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:x-amz-credential|x-amz-signature|x-amz-security-token|token)=)[^&#\s\"']*")
# A Hugging Face user access token: `hf_` and 34 letters and digits today; 30 or more is one.
_HF_TOKEN = re.compile(r"\b(hf_)[A-Za-z0-9]{30,}\b")


def _mask_location(location: str) -> str:
    if _USERINFO.match(location):
        at = location.rfind("@")
        return f"{MASK}@{location[at + 1 :]}" if at >= 0 else MASK
    return location


def mask_credentials(text: str) -> str:
    """`text` with every URI's credentials, every presigned query credential and every Hugging Face
    token replaced by `***`."""
    text = _URI.sub(lambda m: m[1] + _mask_location(m[2]), text)
    text = _QUERY_SECRET.sub(lambda m: m[1] + MASK, text)
    return _HF_TOKEN.sub(lambda m: m[1] + MASK, text)


def print_line(line: str, file: IO[str] | None = None) -> None:
    """Print `line`, meant for a person (an error, a warning, what an interrupt stopped), masked: the
    one way the CLI and `make demo` print such a line (on stderr unless `file` says otherwise)."""
    print(mask_credentials(line), file=sys.stderr if file is None else file, flush=True)


# -- log records -----------------------------------------------------------------------------------
def masked_record(record: logging.LogRecord) -> logging.LogRecord:
    """`record` with its message masked. A record with nothing to mask is left as it is (its handler
    formats it). Otherwise its text arguments are masked in place, keeping their shape (a formatter
    that reads them, such as uvicorn's access lines, still finds them), unless the credential lies
    across the message and its arguments: then the message is the masked text and the arguments go.
    An exception whose traceback holds a credential is rendered into the message, masked, as
    `logging.Formatter` would append it (a handler rendering the exception itself, structlog's or
    Airflow's task log, would show it unmasked). A message that is not text (structlog hands a dict
    to its own formatter) or does not format is left for its handler to report."""
    if not isinstance(record.msg, str):
        return record
    try:
        text = record.getMessage()
        shown = mask_credentials(text)
        if shown != text:
            record.msg, record.args = _masked_parts(record.msg, record.args, shown)
        if record.exc_info and record.exc_info[0] is not None:
            trace = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            if mask_credentials(trace) != trace:
                record.msg, record.args = f"{shown}\n{mask_credentials(trace)}", ()
                record.exc_info, record.exc_text = None, None
    except Exception:  # a message its arguments do not format: the handler's own error report
        return record
    return record


def _masked_parts(msg: str, args: Any, shown: str) -> tuple[str, Any]:
    """(message, arguments) masked each, when they still format to `shown`; else (`shown`, ())."""
    masked, kept = mask_credentials(msg), _masked_args(args)
    try:
        if (masked % kept if kept else masked) == shown:
            return masked, kept
    except (TypeError, ValueError, KeyError):  # the message's own placeholders were masked away
        pass
    return shown, ()


def _masked_args(args: Any) -> Any:
    """A record's arguments with each text masked: a tuple stays a tuple, a mapping a mapping."""
    if isinstance(args, tuple):
        return tuple(mask_credentials(a) if isinstance(a, str) else a for a in args)
    if isinstance(args, dict):
        return {k: mask_credentials(v) if isinstance(v, str) else v for k, v in args.items()}
    return args


_MASKING = "_neuronforge_masks_credentials"  # marks the factory `mask_logs` installed (installed once)


def mask_logs() -> None:
    """From now on every log record this process makes carries its message masked (`masked_record`),
    whatever logger made it (ours, a library's, Airflow's stdlib loggers) and whatever handler shows
    it. A record factory rather than a handler's filter: a filter sees only the handlers it was added
    to, and the ones that show a task's log are Airflow's, configured before our code runs and again
    when it likes. Idempotent; called where each edge starts (see the module docstring)."""
    current = logging.getLogRecordFactory()
    if getattr(current, _MASKING, False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return masked_record(current(*args, **kwargs))

    setattr(factory, _MASKING, True)
    logging.setLogRecordFactory(factory)
