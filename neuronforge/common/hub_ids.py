"""What a Hugging Face Hub repository id is (namespace/name: letters, digits, `-`, `_`, `.`, at most 96
characters each): the one rule the settings, the form's pattern and the registry's checks share."""

from __future__ import annotations

import re

REPO_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REPO_ID = re.compile(REPO_ID_PATTERN)


def is_repo_id(text: str) -> bool:
    return bool(_REPO_ID.fullmatch(text)) and ".." not in text
