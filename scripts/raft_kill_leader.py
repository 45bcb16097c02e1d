#!/usr/bin/env python3
"""Kill the leader of the example Raft cluster (examples/raft-kv) under load.

Run through scripts/raft-kill-leader.sh, which builds the example first. Each round:

1. starts three `raft-kv serve` nodes on localhost ports, each in a fresh directory
   (its Raft log is a walcodec LogDir), and initializes the cluster;
2. runs several concurrent clients writing distinct keys for a while, recording
   every write the cluster acknowledged;
3. kills the leader with SIGKILL and measures how long until another node leads
   (it must be within two election timeouts) and until a write is acknowledged
   again. openraft 0.9 has a follower stand once it heard nothing from a leader
   for the leader lease (election_timeout_max) plus its random election timeout,
   so one election timeout is at most 2 x election_timeout_max, and the bound is
   4 x election_timeout_max (room for one lost election: a candidate with a
   shorter log loses, and the other waits its own timeout);
4. keeps writing, restarts the old leader on its directory (it recovers its log
   and snapshot from disk and catches up), writes some more, stops the clients;
5. checks that every acknowledged write is on every node with its value (each
   node's state machine, read over HTTP once all nodes applied the leader's last
   entry) and that all nodes' state machines are equal;
6. stops the nodes (SIGTERM) and checks that their logs, read from their
   directories with `raft-kv dump-log`, hold the same entries (by log id and
   content) over the indexes they all still hold, and end at the same log id;
7. checks the killed leader's log as it recovered it (read with `raft-kv
   dump-log` from its directory after the kill, before it restarts: later a
   snapshot may replace it) against the other nodes' final logs: every entry
   up to the index it knew committed is theirs, byte for byte (entries after
   it may have been replaced by the new leader; one they purged since is found
   in the state machines instead), and that index is among them.

Exits non-zero on the first failure, keeping the round's directory (node logs
included) for a look. Standard library only.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


class Failure(Exception):
    pass


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def call(addr, method, path, body=None, timeout=5.0):
    """One HTTP request with a JSON body; the decoded JSON answer."""
    host, port = addr.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        if resp.status != 200:
            raise Failure(f"{method} {addr}{path}: HTTP {resp.status}: {raw[:200]!r}")
        return json.loads(raw)
    finally:
        conn.close()


def metrics(addr, timeout=1.0):
    return call(addr, "GET", "/metrics", timeout=timeout)["Ok"]


class Node:
    def __init__(self, args, node_id, addr, root):
        self.args = args
        self.id = node_id
        self.addr = addr
        self.dir = os.path.join(root, f"node-{node_id}")
        self.log_path = os.path.join(root, f"node-{node_id}.out")
        self.proc = None

    def start(self):
        a = self.args
        cmd = [
            a.bin, "serve", "--id", str(self.id), "--addr", self.addr, "--dir", self.dir,
            "--heartbeat-ms", str(a.heartbeat_ms),
            "--election-min-ms", str(a.election_min_ms),
            "--election-max-ms", str(a.election_max_ms),
            "--snapshot-every", str(a.snapshot_every),
            "--keep-before-snapshot", str(a.keep_before_snapshot),
            "--segment-bytes", str(a.segment_bytes),
        ]
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise Failure(f"node {self.id} exited with {self.proc.returncode} at start (see {self.log_path})")
            try:
                metrics(self.addr)
                return
            except (OSError, Failure, http.client.HTTPException):
                if time.monotonic() > deadline:
                    raise Failure(f"node {self.id} not answering on {self.addr}")
                time.sleep(0.05)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure(f"node {self.id} did not stop within 20 s of SIGTERM")
        if code != 0:
            raise Failure(f"node {self.id} exited with {code} on SIGTERM (see {self.log_path})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


class Client(threading.Thread):
    """Writes keys `<prefix>-<n>` one after another to whichever node leads."""

    def __init__(self, prefix, addrs, stop):
        super().__init__(daemon=True)
        self.prefix = prefix
        self.addrs = list(addrs)
        self.stop = stop
        self.acked = []  # (key, value, monotonic time of the answer)
        self.unknown = 0  # writes whose fate is unknown (no answer)
        self.leader = random.choice(self.addrs)
        self.conns = {}

    def conn(self, addr):
        c = self.conns.get(addr)
        if c is None:
            host, port = addr.split(":")
            c = http.client.HTTPConnection(host, int(port), timeout=5)
            self.conns[addr] = c
        return c

    def drop(self, addr):
        c = self.conns.pop(addr, None)
        if c is not None:
            c.close()

    def run(self):
        n = 0
        while not self.stop.is_set():
            key = f"{self.prefix}-{n}"
            value = f"{n}:{random.getrandbits(32):08x}"
            body = json.dumps({"Set": {"key": key, "value": value}})
            # The same write again until acknowledged: a write is a set, so
            # retrying one that did land is harmless.
            while not self.stop.is_set():
                addr = self.leader
                try:
                    c = self.conn(addr)
                    c.request("POST", "/write", body=body, headers={"Content-Type": "application/json"})
                    resp = c.getresponse()
                    answer = json.loads(resp.read())
                except (OSError, http.client.HTTPException, ValueError):
                    self.drop(addr)
                    self.unknown += 1
                    self.leader = random.choice([a for a in self.addrs if a != addr])
                    time.sleep(0.02)
                    continue
                if "Ok" in answer:
                    self.acked.append((key, value, time.monotonic()))
                    break
                forward = answer.get("Err", {}).get("APIError", {}).get("ForwardToLeader")
                if forward and forward.get("leader_node"):
                    self.leader = forward["leader_node"]["addr"]
                else:
                    # No leader known yet (an election), or another error: ask elsewhere.
                    self.leader = random.choice(self.addrs)
                    time.sleep(0.02)
            n += 1
        for addr in list(self.conns):
            self.drop(addr)


def find_leader(nodes, timeout):
    """The node that leads by its own metrics, and its term."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if not node.alive():
                continue
            try:
                m = metrics(node.addr)
            except (OSError, Failure, http.client.HTTPException, ValueError):
                continue
            if m["state"] == "Leader" and m["current_leader"] == node.id:
                return node, m["current_term"]
        time.sleep(0.01)
    raise Failure(f"no leader within {timeout} s")


def wait_converged(nodes, timeout):
    """Waits until every node applied the leader's last log entry; returns it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ms = [metrics(n.addr) for n in nodes]
        leaders = [m for m in ms if m["state"] == "Leader"]
        if len(leaders) == 1:
            target = leaders[0]["last_log_index"]
            applied = [(m["last_applied"] or {}).get("index") for m in ms]
            last = (target, applied)
            if all(a == target for a in applied):
                return target
        time.sleep(0.1)
    raise Failure(f"nodes did not converge within {timeout} s (leader's last index, applied: {last})")


def dump_log(args, node):
    out = subprocess.run([args.bin, "dump-log", "--dir", node.dir], capture_output=True, text=True)
    if out.returncode != 0:
        raise Failure(f"dump-log of node {node.id} failed: {out.stderr.strip()}")
    lines = out.stdout.splitlines()
    head = json.loads(lines[0])
    entries = {}
    for line in lines[1:]:
        entry = json.loads(line)
        entries[entry["log_id"]["index"]] = line
    return head, entries


def log_id_str(log_id):
    if log_id is None:
        return "none"
    return f"{log_id['leader_id']['term']}-{log_id['leader_id']['node_id']}-{log_id['index']}"


def run_round(args, number):
    root = tempfile.mkdtemp(prefix=f"raft-kv-round{number}-")
    ports = free_ports(3)
    nodes = [Node(args, i + 1, f"127.0.0.1:{ports[i]}", root) for i in range(3)]
    stop = threading.Event()
    clients = []
    ok = False
    try:
        for node in nodes:
            node.start()
        init = call(nodes[0].addr, "POST", "/init", [[n.id, n.addr] for n in nodes])
        if "Ok" not in init:
            raise Failure(f"init: {init}")
        find_leader(nodes, 10)

        clients = [Client(f"r{number}c{i}", [n.addr for n in nodes], stop) for i in range(args.clients)]
        for c in clients:
            c.start()
        time.sleep(args.before)

        leader, term = find_leader(nodes, 10)
        # Applied on the leader, so committed: no later leader can remove it, and
        # half a second later it is long on the leader's disk too.
        applied_before = metrics(leader.addr)["last_applied"]["index"]
        time.sleep(0.5)
        acked_before = sum(len(c.acked) for c in clients)
        leader.kill()
        killed_at = time.monotonic()
        survivors = [n for n in nodes if n is not leader]
        # openraft 0.9 has a follower stand for election once it heard nothing
        # from a leader for the leader lease (election_timeout_max) plus its
        # random election timeout (election_timeout_min..election_timeout_max):
        # that is the election timeout a user sees, at most 2 x
        # election_timeout_max. Two of them leave room for one lost election.
        timeout_ms = 2 * args.election_max_ms
        bound_ms = 2 * timeout_ms
        new_leader, new_term = find_leader(survivors, 3 * bound_ms / 1000)
        takeover_ms = (time.monotonic() - killed_at) * 1000
        if new_term <= term:
            raise Failure(f"new leader {new_leader.id} in term {new_term}, not after term {term}")
        print(
            f"round {number}: killed leader {leader.id} (term {term}) after {acked_before} acknowledged writes; "
            f"node {new_leader.id} leads term {new_term} after {takeover_ms:.0f} ms "
            f"(election timeout: lease {args.election_max_ms} + {args.election_min_ms}..{args.election_max_ms} ms "
            f"= {args.election_max_ms + args.election_min_ms}..{timeout_ms} ms; bound two of them, {bound_ms} ms)",
            flush=True,
        )
        if takeover_ms > bound_ms:
            raise Failure(f"takeover took {takeover_ms:.0f} ms, more than two election timeouts ({bound_ms} ms)")
        deadline = time.monotonic() + 3 * bound_ms / 1000
        while not any(c.acked and c.acked[-1][2] > killed_at for c in clients):
            if time.monotonic() > deadline:
                raise Failure("no write acknowledged after the new leader took over")
            time.sleep(0.01)

        time.sleep(args.after)
        # What the killed node holds on disk, read by the store the node runs on
        # (replay of its directory as the node's restart replays it), before the
        # node is back: a snapshot sent to it later may replace its log, and this
        # is what the final comparison checks against the other nodes.
        recovered_head, recovered_entries = dump_log(args, leader)
        leader.start()
        restarted_at = time.monotonic()
        # What it recovered from its own directory (the log after its snapshot),
        # before the new leader sends it anything: it answers only once Raft has
        # replayed its log.
        recovered = metrics(leader.addr)
        recovered_index = recovered["last_log_index"]
        if recovered_index is None or recovered_index < applied_before:
            raise Failure(
                f"node {leader.id} came back with its log at {recovered_index}, "
                f"behind index {applied_before} it had applied before the kill"
            )
        print(
            f"round {number}: node {leader.id} restarted on its directory: log recovered up to index "
            f"{recovered_index} (it had applied {applied_before} half a second before the kill), "
            f"snapshot at {(recovered.get('snapshot') or {}).get('index')}",
            flush=True,
        )
        # Caught up: it applied what the leader had in its log at the restart.
        current, _ = find_leader(survivors, 10)
        target = metrics(current.addr)["last_log_index"]
        while (metrics(leader.addr)["last_applied"] or {}).get("index", -1) < target:
            if time.monotonic() - restarted_at > 60:
                raise Failure(f"node {leader.id} did not catch up with index {target} within 60 s")
            time.sleep(0.02)
        caught_up_s = time.monotonic() - restarted_at
        time.sleep(max(0.0, args.rejoin - caught_up_s))
        stop.set()
        for c in clients:
            c.join(timeout=30)
            if c.is_alive():
                raise Failure("a client did not stop")

        last_index = wait_converged(nodes, 60)
        acked = [(k, v) for c in clients for (k, v, _) in c.acked]
        first_ack = (min(t for c in clients for (_, _, t) in c.acked if t > killed_at) - killed_at) * 1000
        unknown = sum(c.unknown for c in clients)
        states = {}
        for node in nodes:
            state = call(node.addr, "GET", "/dump", timeout=30)["Ok"]
            kv = state["kv"]
            missing = [(k, v) for (k, v) in acked if kv.get(k) != v]
            if missing:
                k, v = missing[0]
                raise Failure(
                    f"node {node.id} lacks {len(missing)} of {len(acked)} acknowledged writes, e.g. {k}={v} (has {kv.get(k)!r})"
                )
            states[node.id] = kv
            if node is leader:
                by_snapshot = state["snapshots_installed"] > 0
        if not all(kv == states[1] for kv in states.values()):
            raise Failure("the nodes' state machines differ")
        current, _ = find_leader(nodes, 10)
        sample = random.sample(acked, min(50, len(acked)))
        for k, v in sample:
            got = call(current.addr, "POST", "/consistent_read", k)
            if got.get("Ok") != v:
                raise Failure(f"consistent_read of {k} on the leader: {got}, want {v!r}")
        snapshots = [(metrics(n.addr).get("snapshot") or {}).get("index") for n in nodes]

        for node in nodes:
            node.stop()
        logs = {n.id: dump_log(args, n) for n in nodes}
        lasts = {i: log_id_str(head["last"]) for i, (head, _) in logs.items()}
        if len(set(lasts.values())) != 1:
            raise Failure(f"the nodes' logs end at different log ids: {lasts}")
        firsts = [min(entries) if entries else None for (_, entries) in logs.values()]
        if None in firsts:
            raise Failure("a node's log holds no entry")
        lo = max(firsts)
        hi = min(max(entries) for (_, entries) in logs.values())
        for index in range(lo, hi + 1):
            lines = {i: entries.get(index) for i, (_, entries) in logs.items()}
            if len(set(lines.values())) != 1:
                raise Failure(f"entry {index} differs between the nodes' logs: {lines}")
        purged = {i: log_id_str(head["purged"]) for i, (head, _) in logs.items()}
        covers = "covering" if lo <= recovered_index <= hi else "not covering"
        # The killed node's log as it recovered it, against the survivors' final
        # logs: every entry up to what it knew committed (what it had applied
        # before the kill, or its committed id on disk) is the cluster's, byte
        # for byte; an entry after that may have been replaced by the new leader.
        survivors_logs = [entries for i, (_, entries) in logs.items() if i != leader.id]
        committed_known = max(applied_before, (recovered_head.get("committed") or {}).get("index", -1))
        # An entry the survivors purged since (a snapshot) is checked against the
        # state machines instead: a committed write of a distinct key holds its
        # value there.
        compared = replaced = in_state = 0
        for index, line in sorted(recovered_entries.items()):
            theirs = {entries.get(index) for entries in survivors_logs} - {None}
            if not theirs:
                if index <= committed_known:
                    payload = json.loads(line).get("payload")
                    write = payload.get("Normal", {}).get("Set") if isinstance(payload, dict) else None
                    if write is not None:
                        if states[leader.id].get(write["key"]) != write["value"]:
                            raise Failure(
                                f"entry {index} of node {leader.id}'s log as recovered after the kill, "
                                f"committed, is not in the state machines: {line}"
                            )
                        in_state += 1
                continue
            if len(theirs) != 1:
                raise Failure(f"entry {index} differs between the surviving nodes' logs")
            compared += 1
            if line != theirs.pop():
                if index <= committed_known:
                    raise Failure(
                        f"entry {index} of node {leader.id}'s log as recovered after the kill differs from "
                        f"the cluster's, at or below the index it knew committed ({committed_known}): {line}"
                    )
                replaced += 1
        recovered_range = (
            f"{min(recovered_entries)}..{max(recovered_entries)}" if recovered_entries else "none"
        )
        if compared + in_state == 0 or committed_known not in recovered_entries:
            raise Failure(
                f"node {leader.id}'s recovered log ({recovered_range}) was not compared: "
                f"{compared} of its entries are in the other nodes' logs, and it "
                f"{'holds' if committed_known in recovered_entries else 'lacks'} index {committed_known} "
                "it knew committed (raise --keep-before-snapshot?)"
            )
        print(
            f"round {number}: {len(acked)} writes acknowledged ({unknown} tries got no answer: node down or mid-write, retried), "
            f"first one after the kill {first_ack:.0f} ms after it; "
            f"all {len(acked)} on each of the 3 nodes, state machines equal, {len(sample)} linearizable reads right; "
            f"old leader caught up with index {target} {caught_up_s:.1f} s after its restart "
            f"({'by a snapshot' if by_snapshot else 'from the log'}); "
            f"logs end at {lasts[1]} (index {last_index}) on every node, entries {lo}..{hi} equal on all "
            f"({covers} the old leader's recovered end {recovered_index}); "
            f"node {leader.id}'s log as recovered after the kill ({recovered_range}, "
            f"last {log_id_str(recovered_head['last'])}): {compared} entries compared with the other nodes', "
            f"equal up to index {committed_known} it knew committed, {replaced} after it replaced by the new leader, "
            f"{in_state} purged from the others' logs found in their state machines "
            f"(purged up to {purged}, snapshots at {snapshots})",
            flush=True,
        )
        ok = True
        return {"takeover_ms": takeover_ms, "first_ack_ms": first_ack, "acked": len(acked), "elections": new_term - term}
    finally:
        stop.set()
        for node in nodes:
            if node.alive():
                node.kill()
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"round {number}: directories and node output kept in {root}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rounds", nargs="?", type=int, default=1, help="rounds, each on a fresh cluster (1)")
    p.add_argument("--bin", required=True, help="the raft-kv binary")
    p.add_argument("--clients", type=int, default=8, help="concurrent writers (8)")
    p.add_argument("--before", type=float, default=8, help="seconds of load before the kill (8)")
    p.add_argument("--after", type=float, default=8, help="seconds of load before the old leader restarts (8)")
    p.add_argument("--rejoin", type=float, default=4, help="seconds of load after it restarts (4)")
    p.add_argument("--heartbeat-ms", type=int, default=50, help="(50; openraft checks election timers every 1.5 heartbeats)")
    p.add_argument("--election-min-ms", type=int, default=250, help="(250)")
    p.add_argument("--election-max-ms", type=int, default=1000, help="(1000; also openraft's leader lease)")
    p.add_argument("--snapshot-every", type=int, default=2000, help="entries between snapshots (2000)")
    p.add_argument(
        "--keep-before-snapshot", type=int, default=10000,
        help="entries kept before a snapshot (10000: the logs compared reach back past the kill; "
        "a few hundred has the old leader catch up by a snapshot instead)",
    )
    p.add_argument("--segment-bytes", type=int, default=64 << 10, help="log segment size (64 KiB)")
    p.add_argument("--keep", action="store_true", help="keep the node directories")
    args = p.parse_args()

    started = time.monotonic()
    results = []
    try:
        for number in range(1, args.rounds + 1):
            results.append(run_round(args, number))
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    takeovers = sorted(r["takeover_ms"] for r in results)
    acks = sorted(r["first_ack_ms"] for r in results)
    print(
        f"PASS: {len(results)} round(s) in {time.monotonic() - started:.0f} s, "
        f"{sum(r['acked'] for r in results)} acknowledged writes, none lost; "
        f"takeover {takeovers[0]:.0f}..{takeovers[-1]:.0f} ms (median {takeovers[len(takeovers) // 2]:.0f}), "
        f"first write after the kill {acks[0]:.0f}..{acks[-1]:.0f} ms, "
        f"bound {4 * args.election_max_ms} ms; "
        f"{sum(1 for r in results if r['elections'] > 1)} round(s) needed more than one election"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
