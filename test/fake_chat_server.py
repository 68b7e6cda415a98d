"""A FAKE OpenAI-compatible chat server for plumbing tests.

It is not a language model: it answers with the first valid action listed in the prompt (or a
scripted failure). Nothing it produces is a planning result; it only proves that requests, retries,
timeouts and parsing work.
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeChatServer:

    def __init__(self, fail_first: int = 0, reply: str | None = None, favourite: str = ""):
        self.fail_first = fail_first
        self.reply = reply
        self.favourite = favourite  # /completions: the action given the best log-probability
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):

            def do_POST(self):  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if len(server.requests) <= server.fail_first:
                    self.send_response(500)
                    self.end_headers()
                    return
                if "prompt" in body:  # /completions with echo: made-up log-probabilities
                    data = json.dumps({"choices": [{"text": body["prompt"],
                                                    "logprobs": server.logprobs(body["prompt"])}]})
                    data = data.encode()
                else:
                    prompt = body["messages"][-1]["content"]
                    first = re.search(r"Valid actions:\n- (.*)", prompt)
                    answer = server.reply or f"ACTION: {first.group(1) if first else 'look'}"
                    data = json.dumps({
                        "choices": [{
                            "message": {
                                "role": "assistant",
                                "content": answer
                            }
                        }]
                    }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def logprobs(self, text: str) -> dict:
        """Word tokens with offsets; the favourite's words score -0.1, every other word -5."""
        words = [(m.group(), m.start()) for m in re.finditer(r"\s*\S+", text)]
        tail = text.rsplit("ACTION:", 1)[-1].strip()
        value = -0.1 if tail == self.favourite else -5.0
        return {"tokens": [w for w, _ in words],
                "token_logprobs": [None] + [value] * (len(words) - 1),
                "text_offset": [o for _, o in words]}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
