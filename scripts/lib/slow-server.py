#!/usr/bin/env python3
"""An HTTP/1.1 server that answers every request after a second, each on its own thread: the
slow provider behind nginx in StuckConnectionTests. It runs in a process of its own so that a
test suite busy on every core cannot starve it. Prints its port, then serves until killed."""
import http.server
import sys
import time

BODY = b'{"name":"projects/p/messages/1"}'


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        time.sleep(1)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    do_GET = answer
    do_POST = answer

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # nginx opens a connection for each request it passes on (no keepalive upstream): 50 at once
    # overflowed the default backlog of 5, and a connection whose handshake the kernel dropped
    # waited for retransmits, sometimes past the request's timeout.
    request_queue_size = 1024


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
