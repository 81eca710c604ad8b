"""FAKE stand-in for the Neuron runtime's device check (libnrt `nrt_init`), shared by the fake SDKs.

Loading a compiled model onto NeuronCores needs Neuron devices (`/dev/neuron0`, ...); compiling does
not. No machine here has a device, so the fakes read how many this "host" has from
`FAKE_NEURON_DEVICES` (unset or 0: none), which tests set only where a Neuron host is meant (the
smoke worker of the deployment test, a fixture standing for one host that has both). A load on a
host without devices fails as the runtime does, so a stage routed to the wrong worker fails.
"""

import os


def devices() -> int:
    try:
        return int(os.environ.get("FAKE_NEURON_DEVICES") or 0)
    except ValueError:
        return 0


def nrt_init(what: str) -> None:
    """Raise like the runtime when this host has no Neuron device to load `what` onto."""
    if devices() < 1:
        raise RuntimeError(
            f"NRT: nrt_init failed: no Neuron device found (/dev/neuron*) while loading {what} "
            "[FAKE runtime: FAKE_NEURON_DEVICES is unset on this host]"
        )
