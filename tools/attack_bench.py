#!/usr/bin/env python3
"""Normal latency of `redline serve` under attack, measured side by side.

A manual benchmark (not a test): starts `redline serve` on a model, runs
`redline bench` (one user, no think time) for a quiet window, then the same
bench while this script attacks the server from its own process with
slowloris connections, stalled 8 MB bodies, oversize prompts and requests
with thousands of messages, and prints quiet vs attacked E2E p50/p99 and
their ratio. Loopback only; every loop is bounded by the window.

  tools/attack_bench.py BUILD_DIR/bin/redline MODEL.gguf [--seconds 20]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def wait_ready(port, limit_s=120):
    end = time.time() + limit_s
    while time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            if b" 200 " in s.recv(256):
                s.close()
                return True
            s.close()
        except OSError:
            pass
        time.sleep(0.1)
    return False


def bench(redline, port, seconds, out):
    subprocess.run([redline, "bench", "--url", f"http://127.0.0.1:{port}",
                    "--users", "1", "--think", "0s", "--max-tokens", "16",
                    "--pin-output-length", "--temperature", "0",
                    "--duration", f"{seconds}s", "--warmup", "2s",
                    "--json", out, "-q"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    phase = r["phases"]["measure"]
    e2e = phase["latency_us"]["e2e"]["success"]
    return e2e["p50"] / 1e3, e2e["p99"] / 1e3, e2e["count"], \
        phase["errors"]["all"]["count"]


def attack(port, stop, counts):
    def slowloris():
        while not stop.is_set():
            socks = []
            for _ in range(100):
                try:
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                    socks.append(s)
                except OSError:
                    counts["refused"] += 1
            end = time.time() + 5
            while time.time() < end and not stop.is_set():
                for s in socks:
                    try:
                        s.sendall(b"X-Slow: y\r\n")
                    except OSError:
                        pass
                time.sleep(0.5)
            for s in socks:
                s.close()
            counts["slowloris"] += len(socks)

    def stalled():
        while not stop.is_set():
            socks = []
            for _ in range(50):
                try:
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 8000000\r\n\r\n{\"messages")
                    socks.append(s)
                except OSError:
                    counts["refused"] += 1
            stop.wait(5)
            for s in socks:
                s.close()
            counts["stalled"] += len(socks)

    def post(body):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status = s.recv(64).split(b" ")[1]
        s.close()
        return status

    big = (b'{"messages":[{"role":"user","content":"' + b"z" * (6 << 20) +
           b'"}]}')
    many = (b'{"max_tokens":1,"messages":[' + b",".join(
        [b'{"role":"user","content":"aaaaaaaaaaaaaaaaaaaa"}'] * 5000) + b"]}")

    def oversize():
        while not stop.is_set():
            counts["oversize_" + post(big).decode()] += 1

    def hostile_template():
        while not stop.is_set():
            counts["many_" + post(many).decode()] += 1

    threads = [threading.Thread(target=f) for f in
               (slowloris, stalled, oversize, hostile_template)]
    for t in threads:
        t.start()
    return threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("redline")
    ap.add_argument("model")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="attack_bench_")
    port_file = os.path.join(work, "port")
    log = open(os.path.join(work, "serve.log"), "w")
    srv = subprocess.Popen([a.redline, "serve", "-m", a.model, "--port", "0",
                            "--port-file", port_file, "--threads",
                            str(a.threads), "--parallel", "4"],
                           stdout=log, stderr=log)
    try:
        while not os.path.exists(port_file):
            time.sleep(0.05)
        port = int(open(port_file).read())
        if not wait_ready(port):
            sys.exit("server not ready")
        quiet = bench(a.redline, port, a.seconds, os.path.join(work, "q.json"))
        stop = threading.Event()
        from collections import Counter
        counts = Counter()
        threads = attack(port, stop, counts)
        time.sleep(1)
        attacked = bench(a.redline, port, a.seconds,
                         os.path.join(work, "a.json"))
        stop.set()
        for t in threads:
            t.join()
        print(f"quiet:    e2e p50 {quiet[0]:.1f} ms  p99 {quiet[1]:.1f} ms  "
              f"({quiet[2]} requests, {quiet[3]} errors)")
        print(f"attacked: e2e p50 {attacked[0]:.1f} ms  p99 {attacked[1]:.1f} ms  "
              f"({attacked[2]} requests, {attacked[3]} errors)")
        print(f"p99 ratio {attacked[1] / quiet[1]:.2f}, p50 ratio "
              f"{attacked[0] / quiet[0]:.2f}; attack: {dict(counts)}")
        print(f"server alive: {srv.poll() is None}")
    finally:
        srv.terminate()
        srv.wait(timeout=60)


if __name__ == "__main__":
    main()
