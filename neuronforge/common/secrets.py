"""The one rule for showing text that may carry a credential: a URI's userinfo and the credentials of
a presigned URL's query string become `***`, wherever the text is shown (CLI errors, the trigger
middleware's sentences, `config`, store refusals). Two rules used to exist and both stopped at the
first `/`, which an AWS secret access key often contains (issue 39).

- userinfo: in `scheme://USER:SECRET@host/...` everything up to the last `@` whose prefix starts with
  `USER:` (a user part without `/`, followed by a `:` that is not a port) is masked, whatever the
  secret holds (`/`, `:`, `%2F`, `@`). When in doubt more is masked, never less.
- `scheme://USER:SECRET/...` without `@` (a form users paste for S3): the whole location is masked.
- query strings: `X-Amz-Credential`, `X-Amz-Signature`, `X-Amz-Security-Token`, `token` (any case)
  keep their names, lose their values.
"""

from __future__ import annotations

import re

MASK = "***"
# A URI: scheme:// then its location up to whitespace, a quote, a backslash or a bracket.
_URI = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s\"'\\<>()\[\]{}]*)")
# `user:` where user has no `/` or `@` and the rest is not a port (digits up to `/` or the end).
_USERINFO = re.compile(r"^[^/@:]*:(?!\d*(?:/|$))")
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:x-amz-credential|x-amz-signature|x-amz-security-token|token)=)[^&#\s\"']*")


def _mask_location(location: str) -> str:
    if _USERINFO.match(location):
        at = location.rfind("@")
        return f"{MASK}@{location[at + 1 :]}" if at >= 0 else MASK
    return location


def mask_credentials(text: str) -> str:
    """`text` with every URI's credentials and every presigned query credential replaced by `***`."""
    text = _URI.sub(lambda m: m[1] + _mask_location(m[2]), text)
    return _QUERY_SECRET.sub(lambda m: m[1] + MASK, text)
