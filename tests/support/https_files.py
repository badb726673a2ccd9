#!/usr/bin/env python3
"""Test support: serve a directory over HTTPS on 127.0.0.1 (a random port).
Prints `listening PORT` once ready.

usage: https_files.py DIR CERT KEY
"""
import functools
import http.server
import ssl
import sys

directory, cert, key = sys.argv[1:4]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
handler.log_message = lambda *args: None
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
