"""`python -m neuronforge_toolchain REQUEST.json RESPONSE.json`: run one request (see protocol.py)."""

import importlib
import sys

from neuronforge_toolchain.orphan import end_with_parent
from neuronforge_toolchain.protocol import RequestError, read_request, write_response

TOOLCHAINS = ("optimum", "nxdi", "tnx", "vllm_native")


def run(request):
    """The result of one checked request."""
    if request["action"] == "detect":
        from neuronforge_toolchain.detect import detect

        return detect(request["spec"])
    toolchain = request.get("toolchain")
    if toolchain not in TOOLCHAINS:
        raise RequestError(f"unknown toolchain {toolchain!r}; known: {', '.join(TOOLCHAINS)}")
    module = importlib.import_module(f"neuronforge_toolchain.{toolchain}")
    return getattr(module, request["action"])(request["spec"])


def main(argv):
    if len(argv) != 2:
        print("usage: python -m neuronforge_toolchain REQUEST.json RESPONSE.json", file=sys.stderr)
        return 2
    end_with_parent()
    request_path, response_path = argv
    try:
        request = read_request(request_path)
    except (OSError, ValueError, RequestError) as exc:
        write_response(response_path, error=exc)
        print(f"neuronforge_toolchain: {exc}", file=sys.stderr)
        return 2
    try:
        result = run(request)
    except RequestError as exc:
        write_response(response_path, error=exc)
        return 2
    except BaseException as exc:  # the toolchain's own failure, reported whole to the worker
        write_response(response_path, error=exc)
        if not isinstance(exc, Exception):
            raise
        return 1
    write_response(response_path, result=result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
