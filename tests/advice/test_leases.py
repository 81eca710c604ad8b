"""The leases' advice, followed: a waiter that gives up, a damaged lease a waiter names, `lease break` given
a key that is no lease's, and a break that lost to a renewal each suggest a command; run in the state the
message describes, it shows or frees the lease it says (in the store the message is about, not the
default one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.common.errors import NeuronforgeError
from neuronforge.interfaces.cli import main
from neuronforge.stores import ArtifactStore, open_store
from tests.advice import covers, follow, follow_on_terminal, suggested
from tests.advice.fresh import home  # noqa: F401 (the fixture)

KEY = "ab" * 32


@pytest.fixture
def store(home: Path, tmp_path: Path) -> ArtifactStore:  # noqa: F811
    """A store that is not the default one, holding KEY's lease, held by this process."""
    store = open_store(f"file://{tmp_path / 'other-store'}")
    assert leases.try_acquire(store, KEY, leases.holder_id(), ttl_s=600) is not None
    return store


def _row(out: str) -> str:
    """The `lease ls` row of KEY."""
    (row,) = [line for line in out.splitlines() if line.startswith(KEY[:12])]
    return row


@covers("neuronforge.artifacts.leases:wait_for")
def test_a_waiter_that_gives_up_names_the_listing_that_shows_the_holder(store: ArtifactStore) -> None:
    with pytest.raises(NeuronforgeError) as given_up:
        leases.wait_for(store, KEY, lambda: None, poll_s=0.01, timeout_s=0)
    (command,) = suggested(str(given_up.value), "neuronforge.artifacts.leases:wait_for")
    done = follow(command)
    assert done.returncode == 0, done.stderr
    row = _row(done.stdout)
    assert " live " in row and f":{os.getpid()} " in row  # who holds it: this host's pid


@covers("neuronforge.artifacts.leases:waiting_line")
def test_a_damaged_lease_s_break_frees_it_now(home: Path, tmp_path: Path) -> None:  # noqa: F811
    store = open_store(f"file://{tmp_path / 'other-store'}")
    store.put_bytes(b"\xff not a lease", layout.lock_entry(KEY))
    damaged = leases.current(store, KEY)
    assert damaged is not None and damaged.damaged and leases.held(damaged)
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is None  # the waiter waits
    (command,) = suggested(leases.waiting_line(store, damaged), "neuronforge.artifacts.leases:waiting_line")
    code, said = follow_on_terminal(command, "y")  # it asks first, as every break does on a terminal
    assert code == 0 and "broken: the damaged lease of" in said, said
    assert leases.try_acquire(store, KEY, "waiter:1:00000000") is not None  # free now: the waiter builds


@covers("neuronforge.artifacts.leases:find")
@pytest.mark.parametrize("given", ["not-a-key", "cdef01"])
def test_a_break_of_no_lease_s_key_names_the_listing_of_that_store(store: ArtifactStore, capsys, given: str) -> None:
    assert main(["lease", "break", given, "--store", store.root_uri]) == 2
    (command,) = suggested(capsys.readouterr().err, "neuronforge.artifacts.leases:find")
    done = follow(command)
    assert done.returncode == 0, done.stderr
    _row(done.stdout)  # the store's leases, each with its key as `lease break` takes it (a unique start)


@covers("neuronforge.artifacts.leases:break_lease")
def test_a_break_that_lost_to_a_renewal_names_the_listing_that_shows_it_live(home: Path, tmp_path: Path) -> None:  # noqa: F811
    store = open_store(f"file://{tmp_path / 'other-store'}")
    seen = leases.try_acquire(store, KEY, "slow:1:00000000", ttl_s=0.01)
    seen.owner = leases.Owner(leases.Host("slow", "other-boot", None), 1)
    store.put_bytes(seen.record(), layout.lock_entry(KEY))
    seen = leases.current(store, KEY)  # what the break read: stale
    leases.renew(store, seen, ttl_s=600)  # its holder renews first
    with pytest.raises(leases.LeaseChanged) as lost:
        leases.break_lease(store, seen)
    (command,) = suggested(str(lost.value), "neuronforge.artifacts.leases:break_lease")
    done = follow(command)
    assert done.returncode == 0, done.stderr
    row = _row(done.stdout)
    assert " live " in row  # the renewal's: not broken
