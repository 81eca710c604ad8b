"""How a launch script reads the store: the bash functions `launch/sync.sh` (vllm-neuron-native) and a
release channel's `resolve.sh` (`channel_launch`) both carry, one text from here, so a host and a pod
need the same tools for both and hear the same sentence when one is missing.

    transfer_tool_named   SYNC_TOOL is one of auto, aws, s5cmd, boto3 (checked first, before any work)
    transfer_ready LIST   every URI of LIST is one these functions read (s3://, file://) and, when one is
                          s3://, a tool that reads it is here: SYNC_TOOL's, or with auto the first of
                          the AWS CLI, s5cmd, python3 with boto3. Else one line naming what is missing
                          and what to do — before anything is fetched.
    transfer_fetch LIST   each line of LIST fetched with that tool (file:// copied)

LIST is a file of `kind<TAB>uri<TAB>dest` lines: `file` (one object to a path) or `tree` (every object
under a prefix into a folder). Each tool honours AWS_ENDPOINT_URL: the AWS CLI v2 reads it itself
(DOCS: https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html), s5cmd is given
`--endpoint-url`, boto3's client `endpoint_url`. The script defines `me` (its name, the prefix of every
line it prints) and `die` (print one line, exit 2) before these functions.

Why three tools: the serving image runs these scripts (a Kubernetes init container runs the image the
build serves in), and whether an image has the AWS CLI is a fact per image — proven for some
(`profiles.vllm_native_k8s.IMAGE_TOOLS`), UNVERIFIED for others — so the script takes what is there.
"""

from __future__ import annotations

TOOLS = ("auto", "aws", "s5cmd", "boto3")

FUNCTIONS = r"""# -- reading the store (neuronforge/artifacts/transfer_sh.py) ------------------------------------
transfer_tool_named() {  # SYNC_TOOL: auto (the default), aws, s5cmd or boto3
  tool="${SYNC_TOOL:-auto}"
  case "$tool" in auto|aws|s5cmd|boto3) ;; *) die "SYNC_TOOL=$tool: one of auto, aws, s5cmd, boto3" ;; esac
}
transfer_ready() {  # transfer_ready LIST: every tool LIST's fetch needs is here, else one line, nothing fetched
  local other first_s3
  other="$(cut -f2 "$1" | grep -v -m1 -E '^(s3|file)://' || true)"
  [ -z "$other" ] || die "cannot download $other: only s3:// and file:// stores"
  first_s3="$(cut -f2 "$1" | grep -m1 '^s3://' || true)"
  [ -n "$first_s3" ] || return 0
  if [ "$tool" = auto ]; then
    if command -v aws >/dev/null; then tool=aws
    elif command -v s5cmd >/dev/null; then tool=s5cmd
    elif python3 -c 'import boto3' 2>/dev/null; then tool=boto3
    else die "reading $first_s3 needs the AWS CLI (aws), s5cmd or python3 with boto3, and none is here:" \
      "use an image with awscli, or put s5cmd on PATH and set SYNC_TOOL=s5cmd"
    fi
  fi
  case "$tool" in
    aws) command -v aws >/dev/null || die "SYNC_TOOL=aws but aws (the AWS CLI) is not on PATH:" \
      "use an image with awscli, or set SYNC_TOOL=s5cmd or SYNC_TOOL=boto3" ;;
    s5cmd) command -v s5cmd >/dev/null || die "SYNC_TOOL=s5cmd but s5cmd is not on PATH:" \
      "install it, or set SYNC_TOOL=aws or SYNC_TOOL=boto3" ;;
    boto3) python3 -c 'import boto3' 2>/dev/null || die "SYNC_TOOL=boto3 but python3 cannot import boto3:" \
      "pip install boto3, or set SYNC_TOOL=aws or SYNC_TOOL=s5cmd" ;;
  esac
}
s5() { s5cmd ${AWS_ENDPOINT_URL:+--endpoint-url "$AWS_ENDPOINT_URL"} "$@" >/dev/null; }
transfer_fetch() {  # transfer_fetch LIST: each `file|tree<TAB>uri<TAB>dest` line of LIST, with $tool
  local kind uri dest
  if [ "$tool" = boto3 ]; then
    awk -F'\t' '$2 ~ /^s3:\/\//' "$1" > "$1.s3"
    if [ -s "$1.s3" ]; then
      python3 - "$1.s3" "$me" <<'PY'
import os, sys
import boto3
me = sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
for line in open(sys.argv[1]):
    kind, uri, dest = line.rstrip("\n").split("\t")
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        if kind == "file":
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            s3.download_file(bucket, key, dest)
            continue
        prefix, found = key.rstrip("/") + "/", 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix):]
                if not rel or rel.endswith("/"):
                    continue
                if rel.startswith("/") or ".." in rel.split("/"):
                    sys.exit(f"{me}: refusing s3://{bucket}/{obj['Key']}: it leaves {dest}")
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                s3.download_file(bucket, obj["Key"], os.path.join(dest, rel))
                found += 1
        if not found:
            sys.exit(f"{me}: {uri} holds no files")
    except Exception as exc:  # botocore's ClientError, EndpointConnectionError, NoCredentialsError, ...
        sys.exit(f"{me}: cannot download {uri} with boto3: {exc}")
PY
    fi
  fi
  while IFS=$'\t' read -r kind uri dest; do
    if [ "$kind" = tree ]; then mkdir -p "$dest"; else mkdir -p "$(dirname "$dest")"; fi
    case "$tool:$kind:$uri" in
      *:tree:file://*) cp -R "${uri#file://}/." "$dest/" ;;
      *:file:file://*) cp "${uri#file://}" "$dest" ;;
      boto3:*:s3://*) ;;  # fetched above, in one process
      aws:tree:s3://*) aws s3 sync --only-show-errors "$uri" "$dest" < /dev/null ;;
      aws:file:s3://*) aws s3 cp --only-show-errors "$uri" "$dest" < /dev/null ;;
      s5cmd:tree:s3://*) s5 cp "$uri/*" "$dest/" < /dev/null ;;
      s5cmd:file:s3://*) s5 cp "$uri" "$dest" < /dev/null ;;
      *) die "cannot download $uri with SYNC_TOOL=$tool (transfer_ready was not asked first)" ;;
    esac
  done < "$1"
}
# -- end of reading the store ----------------------------------------------------------------------
"""
