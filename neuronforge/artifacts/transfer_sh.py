"""How a launch script reads the store: the bash functions `launch/sync.sh` (vllm-neuron-native) and a
release channel's `resolve.sh` (`channel_launch`) both carry, one text from here, so a host and a pod
need the same tools for both and hear the same sentence when one is missing.

    transfer_tool_named   SYNC_TOOL is one of auto, boto3, aws, s5cmd (checked first, before any work)
    transfer_ready PLAN   every URI of PLAN is one these functions read (s3://, file://) and, when one is
                          s3://, a tool that reads it is here: SYNC_TOOL's, or with auto the first of
                          python3 with boto3, the AWS CLI, s5cmd. Else one line naming what is missing
                          and what to do — before anything is fetched.
    transfer_fetch PLAN [REUSE]
                          every file of PLAN fetched and verified by `launch_fetch` (its text, embedded):
                          parallel ranged reads hashed while they stream, files already here and verified
                          kept without reading them (`.neuronforge-sync.json`), one MB/s line at the end

PLAN is a file of `uri<TAB>root<TAB>path<TAB>size<TAB>sha256<TAB>against` lines (`launch_fetch`); a
file:// URI is read by python3 itself whatever SYNC_TOOL says. Each tool honours AWS_ENDPOINT_URL:
botocore reads it itself, as does the AWS CLI (DOCS:
https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html), s5cmd is given
`--endpoint-url`. The script defines `me` (its name, the prefix of every line it prints) and `die`
(print one line, exit 2) before these functions.

Why three tools: the serving image runs these scripts (a Kubernetes init container runs the image the
build serves in), and whether an image has boto3 or the AWS CLI is a fact per image — proven for some
(`profiles.vllm_native_k8s.IMAGE_TOOLS`), UNVERIFIED for others — so the script takes what is there.
boto3 comes first: with it the fetch is parallel and verified as it streams (`launch_fetch`); with
aws or s5cmd each file is fetched whole, then read once more to be hashed.
"""

from __future__ import annotations

from pathlib import Path

TOOLS = ("auto", "boto3", "aws", "s5cmd")
# The fetcher's source, run by `python3 -` from a quoted here-document: never expanded by bash.
FETCHER = (Path(__file__).parent / "launch_fetch.py").read_text()
_END = "NF_LAUNCH_FETCH"
if f"\n{_END}\n" in FETCHER or "@@" in FETCHER:  # its end line, or channel_launch's placeholders
    raise RuntimeError("launch_fetch.py's text would not survive being embedded in the launch scripts")

FUNCTIONS = (
    r"""# -- reading the store (neuronforge/artifacts/transfer_sh.py) ------------------------------------
transfer_tool_named() {  # SYNC_TOOL: auto (the default), boto3, aws or s5cmd
  tool="${SYNC_TOOL:-auto}"
  case "$tool" in auto|aws|s5cmd|boto3) ;; *) die "SYNC_TOOL=$tool: one of auto, aws, s5cmd, boto3" ;; esac
}
has_boto3() {  # without importing it (a second): botocore is what the fetcher uses, boto3 brings it; asked once
  [ -n "${_has_boto3:-}" ] \
    || { python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("botocore") is None)' 2>/dev/null \
         && _has_boto3=yes || _has_boto3=no; }
  [ "$_has_boto3" = yes ]
}
transfer_ready() {  # transfer_ready PLAN: every tool PLAN's fetch needs is here, else one line, nothing fetched
  local other first_s3
  other="$(cut -f1 "$1" | grep -v -m1 -E '^(s3|file)://' || true)"
  [ -z "$other" ] || die "cannot download $other: only s3:// and file:// stores"
  first_s3="$(cut -f1 "$1" | grep -m1 '^s3://' || true)"
  [ -n "$first_s3" ] || return 0
  if [ "$tool" = auto ]; then
    if has_boto3; then tool=boto3
    elif command -v aws >/dev/null; then tool=aws
    elif command -v s5cmd >/dev/null; then tool=s5cmd
    else die "reading $first_s3 needs the AWS CLI (aws), s5cmd or python3 with boto3, and none is here:" \
      "use an image with awscli, or put s5cmd on PATH and set SYNC_TOOL=s5cmd"
    fi
  fi
  case "$tool" in
    aws) command -v aws >/dev/null || die "SYNC_TOOL=aws but aws (the AWS CLI) is not on PATH:" \
      "use an image with awscli, or set SYNC_TOOL=s5cmd or SYNC_TOOL=boto3" ;;
    s5cmd) command -v s5cmd >/dev/null || die "SYNC_TOOL=s5cmd but s5cmd is not on PATH:" \
      "install it, or set SYNC_TOOL=aws or SYNC_TOOL=boto3" ;;
    boto3) has_boto3 || die "SYNC_TOOL=boto3 but python3 cannot import boto3:" \
      "pip install boto3, or set SYNC_TOOL=aws or SYNC_TOOL=s5cmd" ;;
  esac
}
transfer_fetch() {  # transfer_fetch PLAN [REUSE]: every file of PLAN, verified (neuronforge/artifacts/launch_fetch.py)
  python3 - "$me" "$tool" "$@" <<'"""
    + _END
    + "'\n"
    + FETCHER
    + _END
    + r"""
}
# -- end of reading the store ----------------------------------------------------------------------
"""
)
