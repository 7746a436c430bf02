"""A stand-in vLLM engine on loopback, for tests/proxy_affinity/check.py.

Answers what the proxy's membership checker probes (``GET /health``, ``GET /v1/models``
with the served model) and the two completion endpoints, streamed (server-sent events,
chunked) or not. A completion takes ``max_tokens`` x ``--token-seconds`` (default 10 ms a
token) so tests can hold requests in flight, after a "prefill" of the prompt's tokens
(its characters / 4) that the stand-in's prefix cache does not hold, at
``--prefill-seconds`` a token (default 0: none). The cache is vLLM's idea reduced to
whole messages: a request hits the longest run of leading messages (and of a text
prompt, the whole prompt) seen before; ``GET /metrics`` reports vllm:prefix_cache_queries /
vllm:prefix_cache_hits (tokens) and vllm:num_requests_running / _waiting as vLLM names them,
and streamed answers end with ``usage`` when ``stream_options.include_usage`` asks. Counts requests in flight and the most seen
at once; ``GET /stats`` returns them with the requests served, ``POST /stats/reset``
zeroes the peak and the count. Never looks at a routing key.

On SIGTERM it stops accepting connections at once (a client then gets "connection
refused", as from a vLLM that exits), closes its idle keep-alive connections, lets
requests in flight finish (closing their connections after them), then exits - what
uvicorn does for vLLM.

  standin.py --name up-a [--host 127.0.0.1] --port 18001 --model lab-chat --api-key KEY
"""

import argparse
import json
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Engine:
    def __init__(self, name, model, api_key, token_seconds):
        self.name = name
        self.model = model
        self.api_key = api_key
        self.token_seconds = token_seconds
        self.lock = threading.Lock()
        self.inflight = 0
        self.peak = 0
        self.served = 0
        self.connections = set()
        self.stopping = False
        # socket -> busy (a request is being answered on it)
        self.sockets = {}
        self.prefill_seconds = 0.0
        self.cached = set()
        self.queries = 0
        self.hits = 0
        self.generated = 0

    def prefill(self, body):
        """Tokens of the prompt and of its cached part; remembers every leading run of messages."""
        if isinstance(body.get("messages"), list):
            parts = [json.dumps(m, sort_keys=True) for m in body["messages"]]
        else:
            parts = [json.dumps(body.get("prompt"))]
        total, hit, prefix = 0, 0, ""
        with self.lock:
            for part in parts:
                prefix += part
                tokens = max(1, len(part) // 4)
                if prefix in self.cached and hit == total:
                    hit += tokens
                total += tokens
                self.cached.add(prefix)
            self.queries += total
            self.hits += hit
        return total, hit

    def metrics(self):
        with self.lock:
            return ("vllm:num_requests_running{model_name=\"%s\"} %d\n"
                    "vllm:num_requests_waiting{model_name=\"%s\"} 0\n"
                    "vllm:prefix_cache_queries_total{model_name=\"%s\"} %d\n"
                    "vllm:prefix_cache_hits_total{model_name=\"%s\"} %d\n"
                    "vllm:generation_tokens_total{model_name=\"%s\"} %d\n"
                    % (self.model, self.inflight, self.model, self.model, self.queries, self.model, self.hits,
                       self.model, self.generated))

    def enter(self):
        with self.lock:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)

    def leave(self):
        with self.lock:
            self.inflight -= 1
            self.served += 1

    def stats(self):
        with self.lock:
            return {"name": self.name, "inflight": self.inflight, "peak": self.peak, "served": self.served,
                    "connections": len(self.connections)}

    def reset(self):
        with self.lock:
            self.peak = self.inflight
            self.served = 0
            self.connections = set()


def handler_for(engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # As uvicorn does for vLLM: no Nagle delay between the headers and each chunk.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with engine.lock:
                engine.sockets[self.connection] = False

        def finish(self):
            with engine.lock:
                engine.sockets.pop(self.connection, None)
            super().finish()

        def handle_one_request(self):
            # Idle until a request's first byte arrives; busy until its answer is sent.
            self.rfile.peek(1)
            with engine.lock:
                if self.connection in engine.sockets:
                    engine.sockets[self.connection] = True
            try:
                super().handle_one_request()
            finally:
                with engine.lock:
                    if self.connection in engine.sockets:
                        engine.sockets[self.connection] = False
                    if engine.stopping:
                        self.close_connection = True

        def reply(self, status, doc):
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorised(self):
            if not engine.api_key:
                return True
            if self.headers.get("Authorization") == "Bearer %s" % engine.api_key:
                return True
            self.reply(401, {"error": "Unauthorized"})
            return False

        def do_GET(self):
            if self.path == "/health":
                self.reply(200, {})
            elif self.path == "/metrics":
                body = engine.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif self.path == "/stats":
                self.reply(200, engine.stats())
            elif self.path == "/v1/models":
                if self.authorised():
                    card = {"id": engine.model, "object": "model", "max_model_len": 4096}
                    self.reply(200, {"object": "list", "data": [card]})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path == "/stats/reset":
                engine.reset()
                self.reply(200, engine.stats())
                return
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self.reply(404, {"error": "not found"})
                return
            if not self.authorised():
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self.reply(400, {"error": "body is not JSON"})
                return
            with engine.lock:
                engine.connections.add(self.client_address[1])
            tokens = int(body.get("max_tokens") or 1)
            engine.enter()
            try:
                prompt, cached = engine.prefill(body)
                time.sleep((prompt - cached) * engine.prefill_seconds)
                usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
                if body.get("stream"):
                    self.stream(tokens, usage if (body.get("stream_options") or {}).get("include_usage") else None)
                else:
                    time.sleep(tokens * engine.token_seconds)
                    self.reply(200, {"object": "chat.completion", "model": engine.model, "served_by": engine.name,
                                     "received_bytes": len(raw),
                                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                                     "usage": usage})
                with engine.lock:
                    engine.generated += tokens
            finally:
                engine.leave()

        def chunk(self, text):
            data = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def stream(self, tokens, usage=None):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for dummy in range(tokens):
                time.sleep(engine.token_seconds)
                self.chunk("data: %s\n\n" % json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}}],
                                                        "served_by": engine.name}))
            if usage:
                self.chunk("data: %s\n\n" % json.dumps({"choices": [], "usage": usage}))
            self.chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address (127.0.0.0/8)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="lab-chat")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--token-seconds", type=float, default=0.01)
    parser.add_argument("--prefill-seconds", type=float, default=0.0, help="per prompt token not in the cache")
    args = parser.parse_args()
    engine = Engine(args.name, args.model, args.api_key, args.token_seconds)
    engine.prefill_seconds = args.prefill_seconds
    server = ThreadingHTTPServer((args.host, args.port), handler_for(engine))
    server.daemon_threads = True
    stopping = threading.Event()

    def stop(*dummy):
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stopping.wait()
    server.shutdown()
    server.server_close()   # refused from now on
    with engine.lock:
        engine.stopping = True
        idle = [sock for sock, busy in engine.sockets.items() if not busy]
    for sock in idle:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    deadline = time.monotonic() + 60
    while engine.stats()["inflight"] and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
