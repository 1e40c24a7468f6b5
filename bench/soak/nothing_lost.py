#!/usr/bin/env python3
""""Nothing lost" soak of `ember server` (issue 13): pushes with unique ids while the server
is killed, its disk fills and frees, and it restarts; at the end every acknowledged push
must be queryable.

What it does, for --minutes (default 10):
  * the data directory is a size-limited tmpfs (--disk-mib, default 48; needs root) so the
    disk really fills;
  * --pushers threads (default 4) push folded profiles over the legacy `/ingest` route, one
    unique frame `id_<n>` (value 1) per push plus a 4 KB stack shared by all (so a log
    record is big enough for a full disk to cut it), and remember each id the server acknowledged
    (200) and each it refused (503 while the disk is full is expected; connection errors
    while it is down are expected);
  * a chaos loop, every 10 to 30 s, picks one of: kill -9 and restart; SIGTERM and restart;
    fill the disk with a filler file for 5 to 15 s of pushes, then delete it;
  * at the end: a clean stop, a restart, and the folded merge of everything
    (`/api/v1/query?...&format=folded&maxNodes=0`) is read back: every acknowledged id
    must be in it exactly once with one push's value (more would mean a record applied
    twice).

Prints one JSON object (also to --out when given) with the counts; exits 1 when an
acknowledged id is missing or counted twice.

    sudo bench/soak/nothing_lost.py --ember target/release/ember --minutes 10
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ember", default="target/release/ember", help="the ember binary")
    p.add_argument("--minutes", type=float, default=10.0, help="how long the chaos runs")
    p.add_argument("--pushers", type=int, default=4, help="concurrent pushing threads")
    p.add_argument("--disk-mib", type=int, default=48, help="size of the tmpfs data directory")
    p.add_argument("--seed", type=int, default=1, help="seed of the chaos schedule")
    p.add_argument("--out", help="also write the result JSON here")
    return p.parse_args()


class Server:
    """One `ember server` process on a fixed loopback port over one data directory."""

    def __init__(self, ember, data, work):
        self.ember, self.data, self.work = ember, data, work
        self.port = None
        self.proc = None
        self.starts = 0
        with open(os.path.join(work, "config.json"), "w") as f:
            # A small flush threshold so blocks are written (and the disk fills) during
            # the run, not only at shutdown.
            json.dump({"retention_days": 0, "flush_wal_mib": 4, "flush_interval_seconds": 20}, f)

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.work, f"server-{self.starts}.log"), "w")
        listen = f"127.0.0.1:{self.port or 0}"
        self.proc = subprocess.Popen(
            [self.ember, "server", "--listen", listen, "--data-dir", self.data,
             "--config", os.path.join(self.work, "config.json")],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            text = open(log.name).read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                if self.ready():
                    return
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited at start:\n{text[-2000:]}")
            time.sleep(0.05)
        raise SystemExit("server not ready within 120 s")

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Tally:
    """Ids acknowledged and refused, shared by the pushers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next_id = 0
        self.acked = set()
        self.statuses = {}

    def take(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def note(self, pid, status):
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                self.acked.add(pid)


PADDING = "main;padding;" + "x" * 4000


def pusher(server, tally, stop):
    while not stop.is_set():
        pid = tally.take()
        now = int(time.time())
        q = urllib.parse.urlencode({"name": "soak.cpu{}", "from": now - 10, "until": now,
                                    "format": "folded"})
        # The padding stack (the same in every push, so it adds up to one line) makes each
        # log record a few KB, so a full disk can cut one in the middle.
        body = f"main;work;id_{pid} 1\n{PADDING} 1\n".encode()
        req = urllib.request.Request(f"http://127.0.0.1:{server.port}/ingest?{q}", data=body,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                tally.note(pid, r.status)
        except urllib.error.HTTPError as e:
            tally.note(pid, e.code)
            time.sleep(0.05)
        except (urllib.error.URLError, OSError):
            tally.note(pid, "down")
            time.sleep(0.05)


def fill(path):
    """Writes `path` until the file system is full."""
    chunk = b"\0" * (1 << 20)
    with open(path, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass


def read_back(server):
    q = urllib.parse.urlencode({"query": "soak.cpu{}", "from": "now-7d", "until": "now",
                                "format": "folded", "maxNodes": 0})
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/v1/query?{q}",
                                timeout=300) as r:
        text = r.read().decode()
    seen = {}
    for line in text.splitlines():
        stack, _, value = line.rpartition(" ")
        m = re.search(r"id_(\d+)$", stack)
        if m:
            seen[int(m.group(1))] = seen.get(int(m.group(1)), 0) + int(value)
    return seen


def main():
    args = parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (mounts a tmpfs so the disk really fills)")
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="ember-soak-")
    mnt = os.path.join(work, "disk")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.disk_mib}m", "tmpfs", mnt],
                   check=True)
    data = os.path.join(mnt, "data")
    server = Server(args.ember, data, work)
    tally = Tally()
    events = {"kill9": 0, "sigterm": 0, "disk_full": 0}
    stop = threading.Event()
    try:
        server.start()
        threads = [threading.Thread(target=pusher, args=(server, tally, stop), daemon=True)
                   for _ in range(args.pushers)]
        for t in threads:
            t.start()
        end = time.time() + args.minutes * 60
        while time.time() < end:
            time.sleep(rng.uniform(10, 30))
            what = rng.choice(["kill9", "sigterm", "disk_full"])
            events[what] += 1
            if what == "disk_full":
                filler = os.path.join(mnt, "filler")
                fill(filler)
                time.sleep(rng.uniform(5, 15))
                os.remove(filler)
            else:
                server.stop(signal.SIGKILL if what == "kill9" else signal.SIGTERM)
                time.sleep(rng.uniform(0.5, 3))
                server.start()
        stop.set()
        for t in threads:
            t.join()
        server.stop(signal.SIGTERM)
        server.start()
        seen = read_back(server)
        server.stop(signal.SIGTERM)
    finally:
        stop.set()
        server.stop(signal.SIGKILL)
        subprocess.run(["umount", mnt], check=False)
    lost = sorted(i for i in tally.acked if i not in seen)
    # One push's value (the server scales a folded count by the sample rate): the most
    # common one. A record applied twice shows as a multiple of it.
    values = {}
    for v in seen.values():
        values[v] = values.get(v, 0) + 1
    unit = max(values, key=values.get) if values else 1
    doubled = sorted(i for i in tally.acked if seen.get(i, 0) > unit)
    result = {
        "minutes": args.minutes,
        "pushes": tally.next_id,
        "acknowledged": len(tally.acked),
        "queryable_of_acknowledged": len(tally.acked) - len(lost),
        "lost": len(lost),
        "lost_ids_first": lost[:20],
        "counted_twice": len(doubled),
        "stored_but_not_acknowledged": sum(1 for i in seen if i not in tally.acked),
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items(), key=str)},
        "events": events,
        "server_starts": server.starts,
        "work_dir": work,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    sys.exit(1 if lost or doubled else 0)


if __name__ == "__main__":
    main()
