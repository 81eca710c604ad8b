"""The artifact catalog's pages: what the compile farm's store holds, per model and (serving profile,
target), and how to deploy each artifact. A FastAPI app (`base.app`) that `neuronforge_catalog.py`,
next to this folder, mounts on the api-server at `/neuronforge`. One module per page:

    GET /neuronforge/[?page=&per_page=]     index.py     one page of the farm: matrix, filters, latency plot, rows
    GET /neuronforge/artifacts/{key}        artifact.py  one artifact: URIs, verify status, deploy snippets, its
                                                         channels and review state, with its release buttons
    GET /neuronforge/channels?model=        channels.py  a model's release channels and its speed across builds
    GET /neuronforge/release?action=...     release.py   the confirmation of one release action (changes nothing)
    GET /neuronforge/leases[?start_after=]  leases.py    the store's compile leases, read-only
    GET /neuronforge/api/...                api.py       the JSON API: rows, one row, the leases
    GET /neuronforge/static/{name}          base.py      the pages' catalog.css and catalog.js

sharing `base.py` (the app behind Airflow's login, the security headers, the one exception handler that
answers each error with its class's `http_status`, the store a request reads), `params.py` (every
parameter checked before the store is touched), `render.py` (the templates, the links between pages, the
views more than one page shows) and `reads.py` (the store reads more than one page makes).

Every route depends on Airflow's own `get_user` (the `Authorization: Bearer` JWT or the UI's `_token`
cookie): a request without a valid, unexpired token is answered 401 or 403. The data comes from
`neuronforge.farm.rows` (the store read through its farm index); these modules only render it.

The store is treated as hostile: every string it holds reaches the page through Jinja2 templates with
autoescape on (`neuronforge_catalog_templates/`); an `href` built from data is a link only when it is
relative to this server or http(s); every response carries a Content-Security-Policy that allows no
inline script or style (script and style are the files of `neuronforge_catalog_static/`); a key must be
12 to 64 hex characters and a launch file a plain name before the store is read; error bodies are one
sentence without local paths or tracebacks (the detail goes to the log). Text a store holds that cannot
be encoded (a folder name that is not UTF-8: a lone surrogate) is shown as its `\\xNN` escape by the rows
(`farm.rows`) and, whatever else carries it, by the responses themselves (`ShownHTML`, `ShownJSON`): one
record never makes a page fail to encode.

A page view costs the farm index's head, tail and the pages it shows (`farm.farm_page`, called once);
an artifact's JSON answer costs its index pointer, manifest and folder listing (`farm.farm_row`: 3
requests; the deploy snippets are the manifest's own record of its launch files, read one request each
only for a manifest published before it recorded them); its page adds its review record and its model's
channels (one listing of `channels/<org>/<name>/` and one read per channel); a model's channels page
that listing, one review read per current build and, per channel, the check of its build, and for its
speed charts one `farm_page` of the model's rows; a confirmation the few reads its action checks.
"""

from . import api, artifact, channels, index, leases, release
from .base import app
from .render import PREFIX

__all__ = ["PREFIX", "api", "app", "artifact", "channels", "index", "leases", "release"]
