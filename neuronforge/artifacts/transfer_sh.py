"""How a launch script reads the store: the bash functions `launch/sync.sh` (vllm-neuron-native) and a
release channel's `resolve.sh` (`channel_launch`) both carry, one text (`launch_templates/transfer.sh`,
which both templates include), so a host and a pod need the same tools for both and hear the same
sentence when one is missing.

    transfer_tool_named   SYNC_TOOL is one of auto, boto3, aws, s5cmd (checked first, before any work)
    transfer_ready PLAN   every URI of PLAN is one these functions read (s3://, file://) and, when one is
                          s3://, a tool that reads it is here: SYNC_TOOL's, or with auto the first of
                          python3 with boto3, the AWS CLI, s5cmd. Else one line naming what is missing
                          and what to do — before anything is fetched.
    transfer_fetch PLAN [REUSE]
                          every file of PLAN fetched and verified by `launch_fetch` (its text, embedded):
                          parallel ranged reads hashed while they stream, files already here and verified
                          kept without reading them (`.neuronforge-sync.json`), one MB/s line at the end

    plan_line URI ROOT PATH
                          one plan line for a file no record names (channel.json, a manifest), each
                          field escaped (`plan_field`) so a folder's name may hold a tab or a newline

PLAN is a file of `uri<TAB>root<TAB>path<TAB>size<TAB>sha256<TAB>against` lines (`launch_fetch`, whose
fields escape backslash, tab and newline); a file:// URI is read by python3 itself whatever SYNC_TOOL
says. Each tool honours AWS_ENDPOINT_URL: botocore reads it itself, as does the AWS CLI (DOCS:
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

from neuronforge.artifacts import launch_script

TOOLS = ("auto", "boto3", "aws", "s5cmd")
# The fetcher's source, run by `python3 -` from a quoted here-document (launch_templates/transfer.sh):
# never expanded by bash, so nothing in it may be the document's end line.
FETCHER = (launch_script.HERE / "launch_fetch.py").read_text(encoding="utf-8")
if "\nNF_LAUNCH_FETCH\n" in FETCHER:
    raise RuntimeError("launch_fetch.py's text would not survive being embedded in the launch scripts")
# The functions as resolve.sh and sync.sh carry them (both include launch_templates/transfer.sh).
FUNCTIONS = launch_script.render("transfer.sh")
