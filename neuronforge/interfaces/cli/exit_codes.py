"""The CLI's exit codes, a contract later tooling relies on: `EXIT_CODES` says what each means, per command
where it differs (printed at the end of `neuronforge --help`); the codes are `ExitCode` (in
`neuronforge.common.errors`, where each error class names its own), returned by the commands under the names
`EXIT_OK`, `EXIT_FAILURE`, ... below. `tests/test_cli_contract.py` reads every command's returns: one outside
this table fails it."""

from __future__ import annotations

from neuronforge.common.errors import ExitCode

# The one exit-code table: what each code means, per command where it differs.
EXIT_CODES: dict[ExitCode, str] = {
    ExitCode.OK: "success; for `plan`, the configuration is valid and fits",
    ExitCode.FAILURE: "a store or environment failure (unreachable store or Hub, full disk, ...), or for "
    "`promote`/`rollback`: another mover changed the channel first (nothing was written); for `lease break`: the "
    "lease changed while deciding, or the break was not confirmed (nothing was written); for `catalog "
    "stale`, `catalog check`, `recompile` and `gc`: some items could not be checked or handled (source unresolved, "
    "no toolchain "
    'here, config unavailable, a manifest not confirming the index): the summary line counts them, never "ok" '
    "over them",
    ExitCode.USAGE: "usage error: unknown instance or profile, malformed value, missing file, unknown key",
    ExitCode.REJECTED: "`plan`/`run`: the configuration is invalid or does not fit (or `run`'s smoke test failed); "
    "`fetch`/`quantize`: the checkpoint failed verification; `show`: the artifact is damaged (manifest gone, a "
    "file missing or of another size; recorded in the farm index); `verify`: a file does not match the manifest, "
    "the farm index disagrees with the manifests, the profile's consumer would refuse the artifact, or (with "
    "`--store --repair`) the scrub found a damaged artifact; "
    "`catalog check`: the catalog has problems; `promote`/`rollback`: the build may not go to the channel (not "
    "published, damaged or not verifying, smoke failed, another model or profile line, rejected, not approved "
    "where the channel requires it, a history entry whose manifest digest differs, or, for a gated channel, a "
    "regression against the build it serves that `--accept-regression` does not accept); `compare`: the candidate "
    "is a regression or its numerics differ; `promote`/`rollback`/"
    "`channels`/`history`: the channel's record is not one (a folder, another kind of file); `recompile`: the SDK "
    "release is not in the profile data (what is known of it is "
    "printed; nothing is built); `lease break`: the lease's holder is a running process of this host (stop it instead)",
    ExitCode.STALE: "`catalog stale`: some catalog target has no artifact for the current toolchain; "
    "`recompile --dry-run`: some catalog target would be rebuilt",
    ExitCode.INTERRUPTED: "interrupted by SIGINT (Ctrl+C): the command stopped its children, released its build "
    "lease and said in one line what it was doing and what was already published (nothing, for a `run` "
    "stopped before its manifest); a second Ctrl+C while it cleans up ends it at once (128 + 2)",
    ExitCode.TERMINATED: "terminated by SIGTERM (`kill`, a CI step's timeout): as for 130 (128 + 15)",
    ExitCode.CLOSED_PIPE: "the reader of the output went away (e.g. `| head` had its lines): the command stopped "
    "there, quietly, as a program stopped by SIGPIPE does (128 + 13)",
}
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_REJECTED, EXIT_STALE, EXIT_CLOSED_PIPE = (
    ExitCode.OK,
    ExitCode.FAILURE,
    ExitCode.USAGE,
    ExitCode.REJECTED,
    ExitCode.STALE,
    ExitCode.CLOSED_PIPE,
)
EXIT_INTERRUPTED, EXIT_TERMINATED = ExitCode.INTERRUPTED, ExitCode.TERMINATED
