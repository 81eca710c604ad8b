"""The artifact catalog in the Airflow UI: the plugin Airflow loads from its plugins folder.

It mounts the catalog's app (`neuronforge_catalog_pages/`, a package of one module per page) on the
api-server at `/neuronforge` (`fastapi_apps`) and adds a navigation entry, "Artifact catalog"
(`external_views`, shown inside the UI in a same-origin iframe). Airflow imports every `.py` file of its
plugins folder as a module of its own, so `.airflowignore` keeps it out of the package (whose modules it
would import once more, each under its bare name); the package is imported by name, from the plugins
folder Airflow puts on `sys.path` (`settings.prepare_syspath_for_config_and_plugins`) — and that this
module puts there too when something else loads it by its path (the tests, `bench/farm_scale.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

import neuronforge_catalog_pages as pages

app = pages.app
PREFIX = pages.PREFIX


class NeuronforgeCatalogPlugin(AirflowPlugin):
    name = "neuronforge_catalog"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": app, "url_prefix": PREFIX, "name": "neuronforge artifact catalog"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        {
            "name": "Artifact catalog",
            "href": f"{PREFIX}/",
            "destination": "nav",
            "url_route": "neuronforge-catalog",
            "category": "browse",
        }
    ]
