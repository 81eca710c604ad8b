"""FAKE `vllm` command line (`vllm serve MODEL [flags]`, vllm/entrypoints/cli/main.py): builds the
engine as the real CLI does (transformers imported first, then the engine's warm-up through the
plugin's cache), logs uvicorn's "Application startup complete." and answers GET /health on --port."""

import sys


def main(argv=None):
    import transformers  # noqa: F401  the real CLI imports it before building the engine

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: vllm serve MODEL [options]", file=sys.stderr)
        return 2
    model, words = argv[1], argv[2:]
    kwargs, port, i = {}, 8000, 0
    ints = {
        "tensor_parallel_size",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "block_size",
        "num_gpu_blocks_override",
        "optimization_level",
        "port",
    }
    while i < len(words):
        name, eq, value = words[i][2:].partition("=")
        name = name.replace("-", "_")
        i += 1
        if not eq:
            if i < len(words) and not words[i].startswith("--"):
                value, i = words[i], i + 1
            else:
                kwargs[name[3:] if name.startswith("no_") else name] = not name.startswith("no_")
                continue
        kwargs[name] = int(value) if name in ints else value
    port = kwargs.pop("port", port)
    from vllm import LLM

    try:
        LLM(model, **kwargs)
    except Exception as exc:
        print(f"ERROR [vllm.entrypoints] engine failed to start: {exc}", flush=True)
        return 1
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", port), Health)
    print("INFO:     Application startup complete.", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
