"""An OpenAI-compatible chat-completions server on 127.0.0.1 for tests and demos.

It plays both the model under test (through the kit's own API model classes) and the judge (through the
kit's build_judge). It is a real HTTP server: requests with base64 images are decoded and logged.

    with LoopbackServer() as server:
        server.script(r'Score:', 'Score: 2')           # regex on the prompt text -> reply
        server.default = lambda req: 'A'                # anything else
        server.fault_rate, server.fault_kinds = 0.2, ('429', '500', 'timeout', 'malformed', 'empty', 'garbage')
        server.reject(r'forbidden topic')               # HTTP 400 for good (a content filter), every time
        server.max_concurrent, server.retry_after = 2, '1'   # a rate limit: HTTP 429 beyond 2 requests at once
        os.environ['OPENAI_API_BASE'] = server.chat_url

Nothing but loopback: the server refuses to bind anywhere else.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable

FAULT_KINDS = ('429', '500', 'timeout', 'malformed', 'empty', 'garbage')
# Faults only ever injected on purpose (fail_next), never by fault_rate: '404' is what vLLM answers for a model
# it does not serve.
QUEUED_ONLY_KINDS = ('404',)
Reply = str | Callable[[dict], str]


@dataclass
class LoggedRequest:
    """One request as the server saw it (never the API key: only whether one was sent)."""
    model: str
    prompt: str                       # all text parts of all messages, joined with newlines
    parts: list                       # the last user message: [('text', str) | ('image', sha1, (w, h))]
    n_images: int
    had_auth: bool
    outcome: str                      # 'ok' or the injected fault kind
    reply: str | None = None
    body: dict = field(default_factory=dict, repr=False)

    @property
    def image_hashes(self) -> list[str]:
        return [p[1] for p in self.parts if p[0] == 'image']


def image_sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _decode_image(url: str):
    """Decode a data URL; returns (sha1 of the bytes, (w, h)) or raises ValueError."""
    if not url.startswith('data:'):
        raise ValueError(f'only data URLs are accepted on loopback, got {url[:40]!r}')
    header, _, payload = url.partition(',')
    raw = base64.b64decode(payload, validate=False)
    size = None
    try:
        from PIL import Image
        with Image.open(io.BytesIO(raw)) as im:
            size = im.size
    except Exception as err:  # PIL raises many types; the request is answered with HTTP 400
        raise ValueError(f'image in request is not decodable: {err}') from err
    return image_sha1(raw), size


def _flatten(messages: list) -> tuple[str, list, int]:
    texts, parts, n_images = [], [], 0
    for msg in messages:
        content = msg.get('content', '')
        msg_parts = []
        if isinstance(content, str):
            texts.append(content)
            msg_parts.append(('text', content))
        else:
            for item in content:
                if item.get('type') == 'text':
                    texts.append(item.get('text', ''))
                    msg_parts.append(('text', item.get('text', '')))
                elif item.get('type') == 'image_url':
                    url = item['image_url']['url'] if isinstance(item.get('image_url'), dict) else item['image_url']
                    sha, size = _decode_image(url)
                    msg_parts.append(('image', sha, size))
                    n_images += 1
        if msg.get('role') == 'user':
            parts = msg_parts
    return '\n'.join(texts), parts, n_images


class LoopbackServer:
    def __init__(self, host: str = '127.0.0.1', port: int = 0, seed: int = 0):
        if host not in ('127.0.0.1', 'localhost', '::1'):
            raise ValueError(f'LoopbackServer binds to loopback only, not {host!r}')
        self.host, self.port = host, port
        self.rules: list[tuple[re.Pattern, Reply]] = []
        self.default: Reply = 'OK'
        self.latency = 0.0                 # seconds added to every request
        self.timeout_sleep = 5.0           # how long a 'timeout' fault stalls before closing
        self.fault_rate = 0.0              # probability of a random fault per request
        self.fault_kinds: Iterable[str] = FAULT_KINDS
        self.down = False                  # answer every request with HTTP 503
        self.rejections: list[tuple[re.Pattern, int]] = []
        # prompt -> True: rejected with HTTP 400 for good; an int: answered with that HTTP status; falsy: answered
        self.rejection_rule: Callable[[str], bool | int] | None = None
        self.max_concurrent = 0            # > 0: requests beyond this many at once get HTTP 429
        self.retry_after: str | None = None    # the Retry-After header sent with every 429
        self._active = 0
        self.most_at_once = 0              # the most requests ever handled at once (rate-limited ones not counted)
        self.log: list[LoggedRequest] = []
        self._queued_faults: list[str] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- scripting -------------------------------------------------------------------------------------------
    def script(self, pattern: str, reply: Reply) -> None:
        """Reply with `reply` (text, or a function of the request JSON) when `pattern` (regex) matches the prompt."""
        self.rules.append((re.compile(pattern, re.S), reply))

    def reject(self, pattern: str, status: int = 400) -> None:
        """Answer every prompt matching `pattern` (regex) with HTTP `status`, every time (a content filter)."""
        self.rejections.append((re.compile(pattern, re.S), status))

    def fail_next(self, kind: str, n: int = 1) -> None:
        if kind not in FAULT_KINDS + QUEUED_ONLY_KINDS:
            raise ValueError(f'unknown fault {kind!r}; known: {FAULT_KINDS + QUEUED_ONLY_KINDS}')
        with self._lock:
            self._queued_faults.extend([kind] * n)

    def count(self, pattern: str | None = None, outcome: str | None = None) -> int:
        regex = re.compile(pattern, re.S) if pattern else None
        with self._lock:
            return sum(1 for r in self.log
                       if (regex is None or regex.search(r.prompt)) and (outcome is None or r.outcome == outcome))

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until no request is being handled (e.g. the ones a killed client left in flight, which would
        otherwise be logged after a reset_log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._active == 0:
                    return
            time.sleep(0.01)
        raise TimeoutError(f'the loopback server still handles {self._active} request(s) after {timeout} s')

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()

    # ---- lifecycle -------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f'http://{self.host}:{self.port}/v1'

    @property
    def chat_url(self) -> str:
        """The full URL the kit wants in OPENAI_API_BASE / --judge-base-url."""
        return f'{self.base_url}/chat/completions'

    def start(self) -> 'LoopbackServer':
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *args):  # keep test output clean; the request log is server.log
                return

            def do_GET(self):
                if self.path.rstrip('/').endswith('/models'):
                    self._send(200, {'object': 'list', 'data': [{'id': 'loopback', 'object': 'model'}]})
                else:
                    self._send(404, {'error': {'message': 'not found'}})

            def do_POST(self):
                length = int(self.headers.get('Content-Length') or 0)
                raw = self.rfile.read(length)
                server._handle(self, raw)

            def _send(self, status: int, payload, raw: bytes | None = None, headers: dict | None = None):
                body = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name='loopback-server', daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- request handling ------------------------------------------------------------------------------------
    def _pick_fault(self) -> str | None:
        with self._lock:
            if self._queued_faults:
                return self._queued_faults.pop(0)
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return self._rng.choice(list(self.fault_kinds))
        return None

    def _reply_for(self, prompt: str, body: dict) -> str:
        for pattern, reply in self.rules:
            if pattern.search(prompt):
                return reply(body) if callable(reply) else reply
        return self.default(body) if callable(self.default) else self.default

    def _handle(self, handler, raw: bytes) -> None:
        with self._lock:
            self._active += 1
            over = bool(self.max_concurrent) and self._active > self.max_concurrent
            if not over:
                self.most_at_once = max(self.most_at_once, self._active)
        try:
            if over:
                with self._lock:
                    self.log.append(LoggedRequest(model='', prompt='', parts=[], n_images=0, had_auth=False,
                                                  outcome='rate_limited'))
                headers = {'Retry-After': self.retry_after} if self.retry_after is not None else None
                return handler._send(429, {'error': {'message': 'Rate limit reached: 2 requests at once',
                                                     'type': 'requests', 'code': 'rate_limit_exceeded'}},
                                     headers=headers)
            return self._answer(handler, raw)
        finally:
            with self._lock:
                self._active -= 1

    def _answer(self, handler, raw: bytes) -> None:
        if self.latency:
            time.sleep(self.latency)
        if not handler.path.rstrip('/').endswith('/chat/completions'):
            return handler._send(404, {'error': {'message': f'unknown path {handler.path}'}})
        if self.down:
            return handler._send(503, {'error': {'message': 'loopback server is down'}})
        try:
            body = json.loads(raw)
            prompt, parts, n_images = _flatten(body.get('messages', []))
        except (ValueError, KeyError, TypeError) as err:
            return handler._send(400, {'error': {'message': f'bad request: {err}'}})
        status = next((code for pattern, code in self.rejections if pattern.search(prompt)), None)
        if status is None and self.rejection_rule is not None:
            ruled = self.rejection_rule(prompt)
            if ruled:
                status = 400 if ruled is True else int(ruled)
        if status is not None:
            with self._lock:
                self.log.append(LoggedRequest(model=str(body.get('model')), prompt=prompt, parts=parts,
                                              n_images=n_images, had_auth=bool(handler.headers.get('Authorization')),
                                              outcome='rejected', body=body))
            return handler._send(status, {'error': {'message': 'The prompt was filtered by the content policy.',
                                                    'type': 'invalid_request_error', 'code': 'content_filter'}})
        fault = self._pick_fault()
        entry = LoggedRequest(model=str(body.get('model')), prompt=prompt, parts=parts, n_images=n_images,
                              had_auth=bool(handler.headers.get('Authorization')), outcome=fault or 'ok', body=body)
        with self._lock:
            self.log.append(entry)
        if fault == '429':
            headers = {'Retry-After': self.retry_after} if self.retry_after is not None else None
            return handler._send(429, {'error': {'message': 'rate limited (injected)', 'type': 'rate_limit'}},
                                 headers=headers)
        if fault == '500':
            return handler._send(500, {'error': {'message': 'internal error (injected)'}})
        if fault == '404':
            return handler._send(404, {'error': {'message': f'The model `{body.get("model")}` does not exist.',
                                                 'type': 'NotFoundError'}})
        if fault == 'timeout':
            time.sleep(self.timeout_sleep)
            handler.close_connection = True
            return None
        if fault == 'malformed':
            return handler._send(200, None, raw=b'{"choices": [{"message": {"content": "trunc')
        if fault == 'empty':
            text = ''
        elif fault == 'garbage':
            text = ''.join(self._rng.choice('#$%&*@!?~^') for _ in range(24))
        else:
            text = self._reply_for(prompt, body)
        entry.reply = text
        handler._send(200, {
            'id': f'loopback-{len(self.log)}', 'object': 'chat.completion', 'created': int(time.time()),
            'model': body.get('model', 'loopback'),
            'choices': [{'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': text}}],
            'usage': {'prompt_tokens': len(prompt.split()), 'completion_tokens': len(text.split()),
                      'total_tokens': len(prompt.split()) + len(text.split())},
        })


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description='Run the loopback OpenAI-compatible server (127.0.0.1 only).')
    parser.add_argument('--port', type=int, default=8000)
    parser.add_argument('--reply', default='A', help='the reply to every request')
    args = parser.parse_args(argv)
    server = LoopbackServer(port=args.port).start()
    server.default = args.reply
    print(f'serving {server.chat_url}', flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == '__main__':
    main()
