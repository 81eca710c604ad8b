# -- reading the store (neuronforge/artifacts/transfer_sh.py) ------------------------------------
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
plan_field() {  # plan_field TEXT: TEXT as one field of a plan line (launch_fetch.read_plan): \\ \t \n escaped
  local b=$'\\' text="$1"
  text="${text//"$b"/"$b$b"}"; text="${text//$'\t'/"$b"t}"; printf '%s' "${text//$'\n'/"$b"n}"
}
plan_line() {  # plan_line URI ROOT PATH: the plan line of one file no record names (size, sha256: -)
  printf '%s\t%s\t%s\t-\t-\t-\n' "$(plan_field "$1")" "$(plan_field "$2")" "$(plan_field "$3")"
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
  python3 - "$me" "$tool" "$@" <<'NF_LAUNCH_FETCH'
@@include ../launch_fetch.py@@
NF_LAUNCH_FETCH
}
# -- end of reading the store ----------------------------------------------------------------------
