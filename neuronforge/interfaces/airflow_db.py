"""Whether a local Airflow home's metadata DB is current, so that `make demo` and `make airflow` skip
`airflow db migrate` (5 s on an idle 2-core machine, 20 to 50 s on a loaded one, for a DB with
nothing to do) only when the migration would change nothing.

A wrong skip is worse than a slow migration, so the DB is current only when all of these hold,
checked without starting Airflow (no import of it: a file read and one SQLite query):

- it is this home's SQLite file: no connection from the environment, `airflow.cfg`'s own
  `sqlite:///` URL (any other database is migrated every time);
- its `alembic_version` is exactly the head of the installed Airflow's migration scripts;
- the `default_pool` and the `neuron_cores` pool `init_home` sets are there, with its slots;
- a migration of ours finished on this very file (`db-current.json`, written after it), under the
  same fingerprint: Airflow's version, the head, the file's identity, `airflow.cfg`'s bytes and every
  `AIRFLOW__*` variable of the environment. What a migration does beyond the schema (the default
  pool, the log templates, an auth manager's or an external DB manager's tables) follows from those.

A stamp keeps the fingerprints its revision was migrated under (`make demo` and `make airflow` run
Airflow with different variables), and is dropped when the revision changes.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sqlite3
from pathlib import Path

STAMP = "db-current.json"
# a connection from the environment (the URL, or a command or secret giving it): not this home's file
CONN_VARS = tuple(f"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN{suffix}" for suffix in ("", "_CMD", "_SECRET"))
_REVISION = re.compile(r"^revision\s*(?::\s*\w+\s*)?=\s*['\"](\w+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*(?::[^=]+)?=\s*(.+)$", re.M)


def installed_head() -> str | None:
    """The head revision of the installed Airflow's migration scripts (`airflow/migrations/versions`),
    read from the files, not imported; None when there is not exactly one."""
    spec = importlib.util.find_spec("airflow")  # a top-level package: found, not imported
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    revisions: set[str] = set()
    parents: set[str] = set()
    for folder in folders:
        for script in (Path(folder) / "migrations" / "versions").glob("*.py"):
            text = script.read_text(errors="replace", encoding="utf-8")
            if (rev := _REVISION.search(text)) is None:
                continue
            revisions.add(rev[1])
            if (down := _DOWN.search(text)) is not None:
                parents.update(re.findall(r"['\"](\w+)['\"]", down[1]))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def airflow_version() -> str | None:
    try:
        return importlib.metadata.version("apache-airflow-core")
    except importlib.metadata.PackageNotFoundError:
        return None


def sqlite_file(home: Path, env: dict[str, str]) -> Path | None:
    """The home's metadata DB when it is a SQLite file `airflow.cfg` names; None otherwise (a
    connection from the environment, another database, no `airflow.cfg` yet)."""
    if any(name in env for name in CONN_VARS):
        return None
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string((home / "airflow.cfg").read_text(encoding="utf-8"))
        url = cfg.get("database", "sql_alchemy_conn", fallback="")
    except (OSError, configparser.Error):
        return None
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    return Path(url.removeprefix("sqlite://"))


def fingerprint(home: Path, env: dict[str, str], db: Path, head: str) -> str:
    """What a migration's outcome depends on besides the DB's own rows (see the module's docstring)."""
    info = db.stat()
    material = {
        "airflow": airflow_version(),
        "head": head,
        "db": [str(db), info.st_dev, info.st_ino],
        "airflow.cfg": hashlib.sha256((home / "airflow.cfg").read_bytes()).hexdigest(),
        "env": sorted((k, v) for k, v in env.items() if k.startswith("AIRFLOW__") or k == "AIRFLOW_HOME"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _rows(db: Path, pool: str) -> tuple[list[str], dict[str, int]]:
    """(alembic_version's rows, slots of `default_pool` and `pool`), read-only."""
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
        versions = [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]
        pools = dict(conn.execute("SELECT pool, slots FROM slot_pool WHERE pool IN ('default_pool', ?)", (pool,)))
    return versions, pools


def current_revision(home: Path, env: dict[str, str], pool: str, slots: int) -> str | None:
    """The DB's revision when the DB is current (every condition of the module's docstring), else None."""
    db = sqlite_file(home, env)
    head = installed_head()
    stamp = _read_stamp(home)
    if db is None or head is None or not db.is_file() or stamp.get("revision") != head:
        return None
    try:
        versions, pools = _rows(db, pool)
        known = fingerprint(home, env, db, head) in stamp.get("fingerprints", [])
    except (OSError, sqlite3.Error):
        return None
    if versions != [head] or "default_pool" not in pools or pools.get(pool) != slots or not known:
        return None
    return head


def record_migrated(home: Path, env: dict[str, str], before: dict | None = None) -> None:
    """After a migration (and the pool) finished: this home's DB is current under this fingerprint,
    and still under those `before` (the stamp `forget` took away) held for the same revision — so a DB
    `make demo` made current stays current for `make airflow` and back (their variables differ)."""
    db, head = sqlite_file(home, env), installed_head()
    if db is None or head is None or not db.is_file():
        return
    stamp = before if before is not None else _read_stamp(home)
    known = stamp.get("fingerprints", []) if stamp.get("revision") == head else []
    mark = fingerprint(home, env, db, head)
    stamp = {"revision": head, "fingerprints": [*[f for f in known if f != mark], mark][-8:]}
    tmp = home / f".{STAMP}.tmp"
    tmp.write_text(json.dumps(stamp), encoding="utf-8")
    os.replace(tmp, home / STAMP)


def forget(home: Path) -> dict:
    """Before a migration: whatever it leaves behind if it fails is not known to be current. Returns
    the stamp it removed, for `record_migrated` to keep once the migration has finished."""
    stamp = _read_stamp(home)
    (home / STAMP).unlink(missing_ok=True)
    return stamp


def _read_stamp(home: Path) -> dict:
    try:
        stamp = json.loads((home / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("fingerprints", []), list) else {}
