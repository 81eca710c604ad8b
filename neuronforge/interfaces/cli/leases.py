"""The lease commands: `lease ls` shows who holds which build (the store's `locks/`, a page at a time) and
`lease break KEY` frees a build whose holder will not come back — never a running process of this host,
always by compare-and-swap, and only once confirmed (`--yes`). See `neuronforge/artifacts/leases.py`."""

from __future__ import annotations

import argparse
import sys
import time

from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_FAILURE, EXIT_OK
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, opened_store, print_json, whole


def _shown(text: str) -> str:
    """Stored text as a terminal can show it: control characters and what cannot be encoded escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text).encode("utf-8", "backslashreplace").decode()


def _at(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _holder(listed) -> str:
    lease = listed.lease
    if lease is None:
        return "-"
    o = lease.owner
    return f"{o.host.hostname}:{o.pid}" if o is not None and o.pid is not None else lease.holder


# -- lease ls ---------------------------------------------------------------------------------------
def _ls_options(p: argparse.ArgumentParser) -> None:
    add_store_args(p, positional=True)
    p.add_argument("--limit", type=whole(1, 10_000), default=100, help="leases per page (default 100)")
    p.add_argument("--start-after", metavar="KEY", help="list leases after this key (the previous page's last)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _cut(text: str, width: int) -> str:
    """A column's cell: `text`, or its start and end around `…` when longer (an Airflow holder is
    dag/run/task and about 90 characters; `--json` has it whole)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return f"{text[:head]}…{text[-(width - 1 - head) :]}"


def cmd_lease_ls(args: argparse.Namespace) -> int:
    from neuronforge.artifacts import layout, leases

    store = opened_store(args.store)
    page = leases.listing(store, start_after=args.start_after or "", limit=args.limit)
    if args.json:
        print_json([listed.row() for listed in page])
        return EXIT_OK
    if page:
        print(f"{'KEY':<12}  {'STATE':<17}  {'HOLDER':<30}  {'STARTED':<20}  LAST HEARTBEAT")
    for listed in page:
        lease = listed.lease
        if lease is None:
            print(f"{_shown(listed.key[:12]):<12}  {listed.state:<17}  {_shown(listed.problem)}")
            continue
        print(
            f"{_shown(listed.key[:12]):<12}  {listed.state:<17}  {_cut(_shown(_holder(listed)), 30):<30}  "
            f"{_at(lease.started):<20}  {_at(lease.heartbeat)}"
        )
    counts = {s: sum(1 for listed in page if listed.state == s) for s in (*leases.STATES, leases.UNREADABLE)}
    said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    noun = "lease" if len(page) == 1 else "leases"
    print(f"{len(page)} {noun}{': ' + said if said else ''} under {store.uri(layout.lock_entry(''))}")
    if len(page) == args.limit:
        print(f"next page: --start-after {_shown(page[-1].key)}")
    return EXIT_OK


# -- lease break ------------------------------------------------------------------------------------
def _break_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", metavar="KEY", help="the lease's cache key, or a unique start of it (`lease ls`)")
    add_store_args(p)
    p.add_argument("--yes", action="store_true", help="break it without asking (needed when stdin is no terminal)")


def _confirmed(question: str) -> bool:
    print(question, end=" ", file=sys.stderr, flush=True)
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_lease_break(args: argparse.Namespace) -> int:
    from neuronforge.artifacts import leases

    store = opened_store(args.store)
    lease = leases.find(store, args.key)
    leases.refuse_to_break(lease)  # before asking: a running holder here is never a question
    now = time.time()
    if leases.state(lease, now) == leases.RELEASED:
        print(f"the lease of {lease.key[:12]} is released already (by {_shown(lease.holder)}): nothing to break")
        return EXIT_OK
    if lease.damaged:  # nothing in its record is trusted: say why it is damaged, not who holds it
        what = f"the damaged lease of {lease.key[:12]} ({_shown(lease.damaged)})"
    else:
        what = (
            f"the lease of {lease.key[:12]} ({leases.state(lease, now)}, held by {_shown(leases.who(lease))} since "
            f"{_at(lease.started)}, last renewal {now - lease.heartbeat:.0f} s ago)"
        )
    if not args.yes:
        stdin = sys.stdin
        if stdin is None or stdin.closed or not stdin.isatty():
            raise InvalidInput(f"not breaking {what}: stdin is not a terminal to confirm on; pass --yes to break it")
        if not _confirmed(f"break {what}? Its run, if still building, will publish nothing [y/N]"):
            print(f"not broken: {what}")
            return EXIT_FAILURE
    leases.break_lease(store, lease)
    print(f"broken: {what}; the next run of it builds at once")
    return EXIT_OK


COMMANDS = (
    Command(
        "lease",
        "see and break compile leases (who builds which key; locks/ in the store)",
        subcommands=(
            Command(
                "ls",
                "list the store's compile leases, a page at a time: live, stale, dead-on-this-host, released",
                _ls_options,
                cmd_lease_ls,
            ),
            Command(
                "break",
                "free a build whose holder will not come back (never a running process of this host)",
                _break_options,
                cmd_lease_break,
            ),
        ),
    ),
)
