#!/usr/bin/env python3
"""Failover drill: three nodes of examples/failover_node.rs over TCP on 127.0.0.1.

Run through scripts/failover-drill.sh, which builds the example first. A primary
with sync_replicas(1) appends from many tasks (each acknowledged key logged to a
file) and two replicas follow it. Each round:

1. lets the load run, then SIGKILLs the primary under load;
2. waits for both replicas to see the cut (they exit, printing their durable end);
3. promotes the replica with the highest end (a new primary process on its
   directory, `promote`), and points the other replica and the old primary's
   directory (a replica now: it rewinds to `common` if it diverged) at it;
4. times kill -> the new primary's first acknowledged append.

Then the last primary is stopped cleanly (SIGTERM: it closes its log, its replicas
hear the goodbye), and the drill checks that every acknowledged record of every
round is in the log exactly once (by content), and that the three directories hold
the same files with the same bytes. Prints the figures; exits non-zero on any
failure, keeping the work directory for a look. Standard library only.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


class Failure(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def position(text):
    segment, offset = text.split(":")
    return (int(segment), int(offset))


class Node:
    """A running failover_node process; its stdout lines, as they come."""

    def __init__(self, bin_path, args, log):
        self.args = args
        self.proc = subprocess.Popen(
            [bin_path] + args,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.split())
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_line(self, word, timeout):
        """The first line starting with `word` (its words); fails past timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if line is None:
                        raise Failure(
                            f"{self.args[:2]} exited (rc {self.proc.wait()}) before '{word}', "
                            f"having said {self.lines[:-1]}"
                        )
                    if line and line[0] == word:
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failure(f"{self.args[:2]}: no '{word}' in {timeout} s")
                self.cond.wait(left)

    def wait_exit(self, timeout):
        rc = self.proc.wait(timeout=timeout)
        if rc != 0:
            raise Failure(f"{self.args[:2]} exited with {rc}")


def acked_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def dir_files(path):
    return {
        name: open(os.path.join(path, name), "rb").read()
        for name in sorted(os.listdir(path))
        if name != "LOCK"
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="the failover_node binary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=float, default=3.0, help="seconds of load before each kill")
    parser.add_argument("--tasks", type=int, default=16, help="concurrent appenders")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    opts = parser.parse_args()

    work = tempfile.mkdtemp(prefix="failover-drill-")
    log = open(os.path.join(work, "nodes.log"), "w")
    os.environ["LOAD_TASKS"] = str(opts.tasks)
    dirs = [os.path.join(work, f"node{i}") for i in range(3)]
    for d in dirs:
        os.mkdir(d)
    ack_files = []
    running = []

    def start_primary(node, tag, promote):
        port = free_port()
        acks = os.path.join(work, f"acks-{tag}")
        ack_files.append(acks)
        args = ["primary", dirs[node], f"127.0.0.1:{port}", acks, tag]
        if promote:
            args.append("promote")
        p = Node(opts.bin, args, log)
        running.append(p)
        return p, f"127.0.0.1:{port}", acks

    def start_replica(node, addr):
        r = Node(opts.bin, ["replica", dirs[node], addr], log)
        running.append(r)
        return r

    failovers, rewinds = [], 0
    try:
        leader = 0
        primary, addr, acks = start_primary(leader, "r0n0", False)
        replicas = {n: start_replica(n, addr) for n in (1, 2)}
        for round_ in range(1, opts.rounds + 1):
            before = acked_lines(acks)
            time.sleep(opts.load)
            if acked_lines(acks) <= before:
                raise Failure(f"round {round_}: no append acknowledged under load")
            killed_at = time.time_ns()
            primary.proc.send_signal(signal.SIGKILL)
            primary.proc.wait()
            ends = {}
            for n, r in replicas.items():
                ends[n] = position(r.wait_line("cut", 30)[1])
                r.wait_exit(30)
            new = max(ends, key=lambda n: ends[n])
            old = leader
            primary, addr, acks = start_primary(new, f"r{round_}n{new}", True)
            others = [n for n in ends if n != new] + [old]
            replicas = {n: start_replica(n, addr) for n in others}
            first = int(primary.wait_line("first-ack", 60)[1])
            opened = int(primary.wait_line("open", 1)[2])
            failovers.append((first - killed_at) / 1e6)
            print(
                f"round {round_}: killed node{old}, replica ends "
                + ", ".join(f"node{n} {e[0]}:{e[1]}" for n, e in sorted(ends.items()))
                + f"; promoted node{new}: open after {(opened - killed_at) / 1e6:.0f} ms, "
                f"accepting writes after {failovers[-1]:.0f} ms",
                flush=True,
            )
            leader = new
        time.sleep(opts.load)
        primary.proc.send_signal(signal.SIGTERM)
        final = position(primary.wait_line("closed", 60)[1])
        primary.wait_exit(60)
        for n, r in replicas.items():
            line = r.wait_line("closed", 60)
            if position(line[1]) != final:
                raise Failure(f"node{n} ended at {line[1]}, the primary at {final}")
            r.wait_exit(30)
        for r in running:
            rewinds += sum(1 for line in r.lines if line and line[0] == "rewind")

        # Every acknowledged record once, in every directory (they are compared below).
        out = subprocess.run(
            [opts.bin, "check", dirs[leader]] + ack_files, capture_output=True, text=True
        )
        sys.stderr.write(out.stderr)
        if out.returncode != 0:
            raise Failure(f"check: {out.stdout.strip()}")
        figures = dict(zip(out.stdout.split()[::2], map(int, out.stdout.split()[1::2])))

        # Byte-identical directories: the same files, the same bytes.
        files = [dir_files(d) for d in dirs]
        compared = 0
        for i in (1, 2):
            if list(files[i]) != list(files[0]):
                raise Failure(f"node{i} holds {list(files[i])}, node0 {list(files[0])}")
            for name, data in files[0].items():
                if files[i][name] != data:
                    raise Failure(f"{name} differs between node0 and node{i}")
                compared += len(data)
        segments = sum(1 for name in files[0] if name.endswith(".log"))

        print(
            f"rounds {opts.rounds}, records acknowledged {figures['acked']}, "
            f"in the log {figures['records']}, lost {figures['lost']}, "
            f"duplicates {figures['duplicates']}, damaged {figures['bad']}, "
            f"rewinds {rewinds}"
        )
        if failovers:
            print(
                "kill -> new primary accepting writes: "
                f"median {statistics.median(failovers):.0f} ms, max {max(failovers):.0f} ms"
            )
        print(
            f"directories byte-identical: {len(files[0])} files ({segments} segments), "
            f"{compared} bytes compared against node0"
        )
    except BaseException as e:
        for p in running:
            if p.proc.poll() is None:
                p.proc.kill()
        print(f"FAILED: {e}\nwork directory kept: {work}", file=sys.stderr)
        sys.exit(1)
    if opts.keep:
        print(f"work directory: {work}")
    else:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
