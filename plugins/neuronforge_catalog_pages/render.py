"""How the pages are rendered: the Jinja2 environment over `neuronforge_catalog_templates/`
(autoescaped, `StrictUndefined`), the links between pages, and the small views more than one page shows
(a build's channels and review state, a latency, a model's name).

The store is hostile: every string it holds reaches a page through a template with autoescape on, and
an `href` built from data is a link only when it is relative to this server or http(s) (`safe_href`)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from neuronforge.common.secrets import mask_credentials
from neuronforge.records.review import REVIEW_STATES
from neuronforge.spec.source import model_ref as source_model_ref

from .params import TEXT_LIMIT

PREFIX = "/neuronforge"  # where the api-server mounts the app (`neuronforge_catalog.py`)
PLUGINS = Path(__file__).resolve().parent.parent  # the plugins folder
TEMPLATES = PLUGINS / "neuronforge_catalog_templates"  # no .py files: Airflow's plugin loader skips them
SEPARATORS = re.compile(r"(?<=[/\-_@:?&=])")


def sentence(text: Any) -> str:
    """A message as one sentence on one line."""
    text = " ".join(str(text).split())
    return text if text.endswith(".") else f"{text}."


def plain(text: Any) -> str:
    """Stored text as a page or JSON shows it: credentials masked, what cannot be encoded escaped."""
    return mask_credentials(str(text)).encode("utf-8", "backslashreplace").decode("utf-8")


def _wbr_parts(value: Any) -> list[str]:
    """`value` split after each `/`, `-`, `_`, `@`, `:`, `?`, `&`, `=` (the `w` macro puts `<wbr>`
    between the parts, each escaped)."""
    return SEPARATORS.split(str(value))


def safe_href(href: Any) -> bool:
    """A link the page may render: a path on this server (`/...`, not `//host`) or an http(s) URL
    with a host. javascript:, data:, vbscript: and the rest are shown as text."""
    if not isinstance(href, str) or any(unicodedata.category(c) == "Cc" for c in href) or "\\" in href:
        return False
    if href.startswith("/"):
        return not href.startswith("//")
    parts = urlsplit(href)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


ENV = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template is HTML: every {{ value }} is escaped
    undefined=StrictUndefined,
    keep_trailing_newline=False,
)
ENV.filters["wbr_parts"] = _wbr_parts
ENV.tests["safe_href"] = safe_href
ENV.globals.update(prefix=PREFIX, static=f"{PREFIX}/static")


def render_page(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


# -- links ----------------------------------------------------------------------------------------
def artifact_href(key: str) -> str:
    return f"{PREFIX}/artifacts/{quote(str(key), safe='')}"


def channels_href(model: str) -> str:
    """A model's channels page; "" for a name the page would refuse for its length (no link)."""
    return f"{PREFIX}/channels?{urlencode({'model': model})}" if 0 < len(model) <= TEXT_LIMIT else ""


def release_href(**fields: Any) -> str:
    """The confirmation page of one release action (`ReleaseRequest` fields; empty ones left out)."""
    return f"{PREFIX}/release?" + urlencode({k: v for k, v in fields.items() if v not in ("", None)})


# -- views more than one page shows ---------------------------------------------------------------
def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"


def latency_view(r: Any) -> dict[str, str]:
    if r.ttft_ms is None and r.per_token_ms is None:
        return {"ttft": "", "per_token": ""}
    return {"ttft": ms(r.ttft_ms), "per_token": ms(r.per_token_ms)}


def short_target(profile: str, target: str) -> str:
    """A target's slug without its profile's name (the column or line already names the profile)."""
    name = profile.partition("@")[0]
    return target.removeprefix(f"{name}-") if name else target


def model_ref(name: str, revision: str) -> str:
    """A build's model as `ls`, `show` and `channels` name it (`spec.source.model_ref`: org/name@rev12)."""
    return source_model_ref(name, revision)


def state_css(state: str) -> str:
    """A review state as a CSS class: one of the three known ones, else `review-other` (a stored
    state is text from the store, never a class name)."""
    return f"review-{state}" if state in REVIEW_STATES else "review-other"


def release_view(names: list[str], state: str, reason: str = "") -> dict[str, Any]:
    """A build's channels and review state as a row, a matrix cell and the artifact page show them.
    A rejected build that a channel points to is `loud`: a warning in words (and why it was
    rejected), not only a colour."""
    names = [str(n) for n in names]
    why = f" ({reason})" if reason else ""
    loud = (
        f"REJECTED{why}, still on {', '.join(names)}: roll back or promote another build" if state == "rejected" else ""
    )
    return {"channels": names, "state": state, "css": state_css(state), "loud": loud if names else ""}


def _decision_view(d: Any) -> dict[str, str]:
    return {"state": d.state, "css": state_css(d.state), "by": d.by, "at": d.at, "reason": d.reason}


def review_view(state: str, record: Any) -> dict[str, Any]:
    """A build's review: its state, who/when/why, the earlier decisions (newest first)."""
    return {
        "state": state,
        "css": state_css(state),
        "current": _decision_view(record.current) if record is not None else None,
        "history": [_decision_view(d) for d in record.history] if record is not None else [],
    }
