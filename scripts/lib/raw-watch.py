#!/usr/bin/env python3
"""A raw watch of one Kubernetes collection, as the API server sends it.

Writes each watch event line to stdout as it arrives (for `nodefall audit
stamp`), and when the server ends the watch (a clean close, as it does to a
watcher it finds too slow), watches again from the last resourceVersion seen,
logging each (re)connection to stderr. No client library: what it sees late,
the server sent late.

usage: raw-watch.py SERVER PATH CA_FILE TOKEN
"""
import http.client
import re
import ssl
import sys
import time
import urllib.parse

server, path, ca, token = sys.argv[1:5]
url = urllib.parse.urlparse(server)
ctx = ssl.create_default_context(cafile=ca)
rv_re = re.compile(rb'"resourceVersion":"(\d+)"')
rv = None
out = sys.stdout.buffer
started = time.time()
while time.time() - started < 3600:
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=600)
    query = "watch=1" + (f"&resourceVersion={rv}" if rv else "")
    conn.request("GET", f"{path}?{query}", headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    print(f"{time.time():.3f} watch {path} from rv {rv}: HTTP {resp.status}", file=sys.stderr, flush=True)
    if resp.status == 410:
        rv = None  # too old: start over from now (what was missed is missed)
        continue
    if resp.status != 200:
        sys.exit(f"watch {path}: HTTP {resp.status} {resp.read(300)!r}")
    lines = 0
    for line in resp:
        if b'"type":"ERROR"' in line[:40]:
            print(f"{time.time():.3f} watch {path}: {line[:200]!r}", file=sys.stderr, flush=True)
            if b'"code":410' in line:
                rv = None
            break
        m = rv_re.search(line)
        if m:
            rv = m.group(1).decode()
        out.write(line)
        out.flush()
        lines += 1
    print(f"{time.time():.3f} watch {path} ended after {lines} events", file=sys.stderr, flush=True)
    conn.close()
