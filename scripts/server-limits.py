#!/usr/bin/env python3
"""What a peer can make bosun-control hold (issue 29's measurements): RSS
around a YAML alias bomb (one 5000-item anchor named 500 times, 47 KB), how
long 5000 TCP connections that never start TLS are kept, and how long 5000
TLS connections are kept idle after one request each, and whether the API
answers meanwhile. Starts its own bosun-control on a free port in a temp
dir under /tmp and stops it at the end.

    scripts/server-limits.py target/debug/bosun-control [bosun-control flags]
"""
import os, select, shutil, socket, ssl, subprocess, sys, tempfile, time

N = 5000


def main():
    binary, flags = sys.argv[1], sys.argv[2:]
    d = tempfile.mkdtemp(prefix="server-limits-")
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen([binary, "--data-dir", d, "--port", "0", *flags], stdout=log, stderr=log)
    try:
        while not os.path.exists(os.path.join(d, "address")):
            time.sleep(0.1)
        host, port = open(os.path.join(d, "address")).read().strip().rsplit(":", 1)
        server = (host, int(port))
        token = open(os.path.join(d, "admin-token")).read().strip()
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        ctx.check_hostname = False
        fds = lambda: len(os.listdir(f"/proc/{proc.pid}/fd"))

        def rss():
            st = open(f"/proc/{proc.pid}/status").read()
            f = {l.split(":")[0]: int(l.split()[1]) // 1024 for l in st.splitlines() if l.startswith(("VmRSS", "VmHWM"))}
            return f["VmRSS"], f["VmHWM"]

        def request(method, path, body=b"", ctype="application/json"):
            s = ctx.wrap_socket(socket.create_connection(server), server_hostname="127.0.0.1")
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                      f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            out = b""
            try:
                while (b := s.recv(65536)):
                    out += b
            except OSError:
                pass
            return out.decode(errors="replace")

        def timed_request():
            a = time.time()
            ok = request("GET", "/api/v1/namespaces").startswith("HTTP/1.1 200")
            return ok, (time.time() - a) * 1000

        def wait_closed(conns, since, limit):
            poll = select.poll()
            by_fd = {c.fileno(): c for c in conns}
            for fd in by_fd:
                poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            held, start = [], time.time()
            while time.time() - start < limit and len(held) < len(conns):
                for fd, _ in poll.poll(500):
                    poll.unregister(fd)
                    held.append(time.time() - since[fd])
            return held, time.time() - start

        request("GET", "/api/v1/namespaces")
        time.sleep(1)
        before = rss()
        bomb = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx: &a ["
                + ",".join(["xxxxxxxx"] * 5000) + "]\ny:\n" + "- *a\n" * 500)
        t = time.time()
        answer = request("POST", "/api/v1/namespaces/default/configmaps", bomb.encode(), "application/yaml")
        took = time.time() - t
        after = rss()
        print(f"YAML bomb ({len(bomb)} bytes): {answer.splitlines()[0]} in {took:.2f} s; "
              f"RSS {before[0]} -> {after[0]} MiB (peak {after[1]} MiB)")

        conns, since = [], {}
        for _ in range(N):
            c = socket.create_connection(server)
            since[c.fileno()] = time.time()
            conns.append(c)
        ok, ms = timed_request()
        print(f"{N} TCP connections without TLS: server descriptors {fds()}; API answered meanwhile: {ok} ({ms:.0f} ms)")
        held, waited = wait_closed(conns, since, 75)
        print(f"  closed: {len(held)}" + (f", each {min(held):.1f}-{max(held):.1f} s after it was opened" if held else "")
              + f"; still open after {waited:.0f} s more: {N - len(held)}; server descriptors now {fds()}")
        for c in conns:
            c.close()

        conns, since = [], {}
        for _ in range(N):
            s = ctx.wrap_socket(socket.create_connection(server), server_hostname="127.0.0.1")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while not got.endswith(b"ok"):
                got += s.recv(1024)
            since[s.fileno()] = time.time()
            conns.append(s)
        ok, ms = timed_request()
        print(f"{N} idle TLS connections after one request: server descriptors {fds()}; API answered meanwhile: {ok} ({ms:.0f} ms)")
        held, waited = wait_closed(conns, since, 150)
        print(f"  closed: {len(held)}" + (f", each {min(held):.1f}-{max(held):.1f} s after its request" if held else "")
              + f"; still open after {waited:.0f} s more: {N - len(held)}; server descriptors now {fds()}")
        for c in conns:
            c.close()
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
