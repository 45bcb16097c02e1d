"""Kill a leader of the example Raft cluster (examples/raft-kv) under load.

Run through scripts/raft-kill-leader.sh, which builds the example first. Each node
runs several Raft groups (--groups, 4 by default: a multi-Raft node, the groups'
logs on one walcodec-raft SharedLog; --own-log runs one group on a LogStore of its
own instead). Each round:

1. starts three `raft-kv serve` nodes on localhost ports, each in a fresh directory,
   and initializes every group, group g on node g mod 3 (which then leads it);
2. runs concurrent clients writing distinct keys to every group for a while,
   recording every write each group acknowledged (each try of a write carries a
   value of its own, so that a write found twice in a log is a duplicate, not a
   retry);
3. reads, from each group's leader, how far the node about to be killed has
   flushed that group's log (openraft's replication metrics: a follower's
   matched log id, which it answers once the entries are flushed; the leader's
   own entry, which it updates once its flush callback fired), then kills the
   leader of group n - 1 in round n (so another node from round to round) with
   SIGKILL, and measures, for each group it led, how long
   until another node leads (within two election timeouts: openraft 0.9 has a
   follower stand once it heard nothing from a leader for the leader lease,
   election_timeout_max, plus its random election timeout, so one election
   timeout is at most 2 x election_timeout_max, and the bound is 4 x
   election_timeout_max, room for one lost election) and until the group
   acknowledges a write again;
4. keeps writing; reads the killed node's log of each group as it is on disk
   (`raft-kv dump-log`, the same replay its restart does) before it restarts, so
   that no snapshot from a leader replaces it first; restarts it on its
   directory, waits until it caught up in every group, writes some more, stops
   the clients;
5. checks, per group: every acknowledged write is on every node with its value
   (each node's state machine once all nodes applied the leader's last entry),
   the nodes' state machines are equal, linearizable reads on the leader match;
6. stops the nodes (SIGTERM) and checks, per group, that their logs hold the same
   entries over the indexes they all still hold and end at the same log id, and
   that every acknowledged write is in each node's log exactly once (where the
   log still reaches back to it; a log purged behind a snapshot must not hold it
   twice either);
7. checks, per group, the killed node's log as recovered from disk: non-empty,
   no index missing between its first and last entry, reaching at least the
   index it had flushed (step 3), and every entry up to the index known
   committed (the group leader's last applied entry read in step 3, or the
   committed id on its disk) byte for byte the other nodes' entry at that index
   (or, where they purged it since, a write found in their state machines).
   Entries after that index may have been replaced by a new leader. A group
   where nothing was compared, or nothing was known flushed, fails the round.

Exits non-zero on the first failure, keeping the round's directories (node logs
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


def metrics(addr, prefix, timeout=1.0):
    return call(addr, "GET", f"{prefix}/metrics", timeout=timeout)["Ok"]


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
        if not a.own_log:
            cmd += ["--groups", str(a.groups)]
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise Failure(f"node {self.id} exited with {self.proc.returncode} at start (see {self.log_path})")
            try:
                metrics(self.addr, a.prefixes[0])
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
    """Writes keys `<name>-<n>` one after another to whichever node leads the group
    at `prefix` (its endpoints' path prefix)."""

    def __init__(self, name, prefix, addrs, stop):
        super().__init__(daemon=True)
        self.name = name
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
            key = f"{self.name}-{n}"
            tries = 0
            # The same key again until acknowledged: a write is a set, so
            # retrying one that did land is harmless. Each try has a value of its
            # own, so that the acknowledged one is told apart in the logs.
            while not self.stop.is_set():
                tries += 1
                value = f"{n}:{tries}:{random.getrandbits(32):08x}"
                body = json.dumps({"Set": {"key": key, "value": value}})
                addr = self.leader
                try:
                    c = self.conn(addr)
                    c.request("POST", f"{self.prefix}/write", body=body, headers={"Content-Type": "application/json"})
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


def find_leader(nodes, prefix, timeout):
    """The node that leads the group at `prefix` by its own metrics, its term and
    its metrics."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if not node.alive():
                continue
            try:
                m = metrics(node.addr, prefix)
            except (OSError, Failure, http.client.HTTPException, ValueError):
                continue
            if m["state"] == "Leader" and m["current_leader"] == node.id:
                return node, m["current_term"], m
        time.sleep(0.01)
    raise Failure(f"group {prefix or '/'}: no leader within {timeout} s")


def wait_converged(nodes, prefix, timeout):
    """Waits until every node applied the group's leader's last log entry; returns it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ms = [metrics(n.addr, prefix) for n in nodes]
        leaders = [m for m in ms if m["state"] == "Leader"]
        if len(leaders) == 1:
            target = leaders[0]["last_log_index"]
            applied = [(m["last_applied"] or {}).get("index") for m in ms]
            last = (target, applied)
            if all(a == target for a in applied):
                return target
        time.sleep(0.1)
    raise Failure(f"group {prefix or '/'}: nodes did not converge within {timeout} s (leader's last index, applied: {last})")


def dump_log(args, node, group):
    cmd = [args.bin, "dump-log", "--dir", node.dir]
    if group is not None:
        cmd += ["--group", str(group)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise Failure(f"dump-log of node {node.id} (group {group}) failed: {out.stderr.strip()}")
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


def index_of(log_id):
    return -1 if log_id is None else log_id["index"]


def flushed_on(leader_metrics, node_id):
    """How far `node_id` flushed the group's log, by its leader's replication
    metrics (the leader's own entry for itself); -1 when unknown."""
    replication = leader_metrics.get("replication") or {}
    return index_of(replication.get(str(node_id)))


def written_set(line):
    payload = json.loads(line).get("payload")
    write = payload.get("Normal", {}).get("Set") if isinstance(payload, dict) else None
    return None if write is None else (write["key"], write["value"])


def run_round(args, number):
    root = tempfile.mkdtemp(prefix=f"raft-kv-round{number}-")
    ports = free_ports(3)
    nodes = [Node(args, i + 1, f"127.0.0.1:{ports[i]}", root) for i in range(3)]
    groups = args.group_ids
    prefixes = args.prefixes
    stop = threading.Event()
    clients = []
    ok = False
    try:
        for node in nodes:
            node.start()
        # Each group initialized on another node (the one initialized stands
        # first and leads), so that the node killed leads some groups and
        # follows in others.
        for g, prefix in enumerate(prefixes):
            init = call(nodes[g % 3].addr, "POST", f"{prefix}/init", [[n.id, n.addr] for n in nodes])
            if "Ok" not in init:
                raise Failure(f"init of group {prefix or '/'}: {init}")
        for prefix in prefixes:
            find_leader(nodes, prefix, 10)

        clients = {
            prefix: [Client(f"r{number}g{g}c{i}", prefix, [n.addr for n in nodes], stop) for i in range(args.clients)]
            for g, prefix in zip(groups, prefixes)
        }
        every_client = [c for cs in clients.values() for c in cs]
        for c in every_client:
            c.start()
        time.sleep(args.before)

        # Round n kills the leader of group n - 1 (mod the groups): another node
        # from round to round.
        victim, _, _ = find_leader(nodes, prefixes[(number - 1) % len(prefixes)], 10)
        # Per group: its leader and term, how far the victim flushed its log, and
        # what the leader applied (so committed). Read before the kill; each only
        # grows until then.
        before = {}
        for prefix in prefixes:
            leader, term, m = find_leader(nodes, prefix, 10)
            before[prefix] = {
                "leader": leader,
                "term": term,
                "flushed": flushed_on(m, victim.id),
                "applied": index_of(m["last_applied"]),
            }
        acked_before = sum(len(c.acked) for c in every_client)
        victim.kill()
        killed_at = time.monotonic()
        survivors = [n for n in nodes if n is not victim]
        led = [p for p in prefixes if before[p]["leader"] is victim]
        timeout_ms = 2 * args.election_max_ms
        bound_ms = 2 * timeout_ms
        takeovers = []
        for prefix in led:
            new_leader, new_term, _ = find_leader(survivors, prefix, 3 * bound_ms / 1000)
            takeover_ms = (time.monotonic() - killed_at) * 1000
            if new_term <= before[prefix]["term"]:
                raise Failure(f"group {prefix or '/'}: new leader {new_leader.id} in term {new_term}, not after term {before[prefix]['term']}")
            if takeover_ms > bound_ms:
                raise Failure(f"group {prefix or '/'}: takeover took {takeover_ms:.0f} ms, more than two election timeouts ({bound_ms} ms)")
            takeovers.append(takeover_ms)
            before[prefix]["elections"] = new_term - before[prefix]["term"]
        print(
            f"round {number}: killed node {victim.id}, leader of {len(led)} of {len(prefixes)} group(s), "
            f"after {acked_before} acknowledged writes; new leaders after "
            f"{', '.join(f'{t:.0f}' for t in takeovers)} ms "
            f"(election timeout: lease {args.election_max_ms} + {args.election_min_ms}..{args.election_max_ms} ms "
            f"= {args.election_max_ms + args.election_min_ms}..{timeout_ms} ms; bound two of them, {bound_ms} ms)",
            flush=True,
        )
        deadline = time.monotonic() + 3 * bound_ms / 1000
        first_acks = []
        for prefix in prefixes:
            while not any(c.acked and c.acked[-1][2] > killed_at for c in clients[prefix]):
                if time.monotonic() > deadline:
                    raise Failure(f"group {prefix or '/'}: no write acknowledged after the kill")
                time.sleep(0.01)

        time.sleep(args.after)
        # What the killed node holds on disk, per group, read by the store the node
        # runs on (the replay its restart does), before it is back: a snapshot sent
        # to it later may replace its log.
        recovered = {}
        for g, prefix in zip(groups, prefixes):
            head, entries = dump_log(args, victim, g)
            name = prefix or "/"
            flushed = before[prefix]["flushed"]
            if not entries:
                raise Failure(f"group {name}: node {victim.id}'s log as recovered after the kill holds no entry")
            lo, hi = min(entries), max(entries)
            if len(entries) != hi - lo + 1:
                missing = next(i for i in range(lo, hi + 1) if i not in entries)
                raise Failure(f"group {name}: node {victim.id}'s recovered log {lo}..{hi} lacks entry {missing}")
            if lo != index_of(head["purged"]) + 1:
                raise Failure(f"group {name}: node {victim.id}'s recovered log starts at {lo}, its purge at {log_id_str(head['purged'])}")
            if flushed < 0:
                raise Failure(
                    f"group {name}: how far node {victim.id} had flushed is unknown (its leader's "
                    "replication metrics name nothing for it): nothing to compare"
                )
            if hi < flushed:
                raise Failure(
                    f"group {name}: node {victim.id} came back with its log at {hi}, "
                    f"behind index {flushed} it had flushed before the kill"
                )
            recovered[prefix] = (head, entries)
        victim.start()
        restarted_at = time.monotonic()
        targets = {}
        for prefix in prefixes:
            current, _, m = find_leader(survivors, prefix, 10)
            targets[prefix] = m["last_log_index"]
        for prefix in prefixes:
            while (metrics(victim.addr, prefix)["last_applied"] or {}).get("index", -1) < targets[prefix]:
                if time.monotonic() - restarted_at > 60:
                    raise Failure(f"group {prefix or '/'}: node {victim.id} did not catch up with index {targets[prefix]} within 60 s")
                time.sleep(0.02)
        caught_up_s = time.monotonic() - restarted_at
        time.sleep(max(0.0, args.rejoin - caught_up_s))
        stop.set()
        for c in every_client:
            c.join(timeout=30)
            if c.is_alive():
                raise Failure("a client did not stop")

        report = {}
        for prefix in prefixes:
            name = prefix or "/"
            last_index = wait_converged(nodes, prefix, 60)
            acked = [(k, v) for c in clients[prefix] for (k, v, _) in c.acked]
            if not acked:
                raise Failure(f"group {name}: no write acknowledged")
            if prefix in led:
                first_acks.append(
                    (min(t for c in clients[prefix] for (_, _, t) in c.acked if t > killed_at) - killed_at) * 1000
                )
            states = {}
            by_snapshot = False
            for node in nodes:
                state = call(node.addr, "GET", f"{prefix}/dump", timeout=30)["Ok"]
                kv = state["kv"]
                missing = [(k, v) for (k, v) in acked if kv.get(k) != v]
                if missing:
                    k, v = missing[0]
                    raise Failure(
                        f"group {name}: node {node.id} lacks {len(missing)} of {len(acked)} acknowledged writes, "
                        f"e.g. {k}={v} (has {kv.get(k)!r})"
                    )
                states[node.id] = kv
                if node is victim:
                    by_snapshot = state["snapshots_installed"] > 0
            if not all(kv == states[1] for kv in states.values()):
                raise Failure(f"group {name}: the nodes' state machines differ")
            current, _, _ = find_leader(nodes, prefix, 10)
            sample = random.sample(acked, min(args.reads, len(acked)))
            for k, v in sample:
                got = call(current.addr, "POST", f"{prefix}/consistent_read", k)
                if got.get("Ok") != v:
                    raise Failure(f"group {name}: consistent_read of {k} on the leader: {got}, want {v!r}")
            report[prefix] = {"acked": acked, "states": states, "last_index": last_index, "by_snapshot": by_snapshot}

        for node in nodes:
            node.stop()
        unknown = sum(c.unknown for c in every_client)
        total_acked = sum(len(r["acked"]) for r in report.values())
        total_compared = 0
        for g, prefix in zip(groups, prefixes):
            name = prefix or "/"
            r = report[prefix]
            logs = {n.id: dump_log(args, n, g) for n in nodes}
            lasts = {i: log_id_str(head["last"]) for i, (head, _) in logs.items()}
            if len(set(lasts.values())) != 1:
                raise Failure(f"group {name}: the nodes' logs end at different log ids: {lasts}")
            firsts = [min(entries) if entries else None for (_, entries) in logs.values()]
            if None in firsts:
                raise Failure(f"group {name}: a node's log holds no entry")
            lo = max(firsts)
            hi = min(max(entries) for (_, entries) in logs.values())
            for index in range(lo, hi + 1):
                lines = {i: entries.get(index) for i, (_, entries) in logs.items()}
                if len(set(lines.values())) != 1:
                    raise Failure(f"group {name}: entry {index} differs between the nodes' logs: {lines}")
            # Every acknowledged write once in each node's log (or, behind a
            # purge, not twice).
            once = 0
            for node_id, (head, entries) in logs.items():
                counts = {}
                for line in entries.values():
                    write = written_set(line)
                    if write is not None:
                        counts[write] = counts.get(write, 0) + 1
                whole = head["purged"] is None
                for write in r["acked"]:
                    count = counts.get(write, 0)
                    if count > 1 or (whole and count != 1):
                        raise Failure(
                            f"group {name}: acknowledged write {write[0]}={write[1]} is {count} times in node "
                            f"{node_id}'s log (purged up to {log_id_str(head['purged'])})"
                        )
                    once += count
            # The killed node's log as it recovered it, against the other nodes'
            # final logs: up to what was known committed, byte for byte.
            recovered_head, recovered_entries = recovered[prefix]
            survivors_logs = [entries for i, (_, entries) in logs.items() if i != victim.id]
            committed_known = max(before[prefix]["applied"], index_of(recovered_head.get("committed")))
            compared = replaced = in_state = 0
            for index, line in sorted(recovered_entries.items()):
                theirs = {entries.get(index) for entries in survivors_logs} - {None}
                if not theirs:
                    if index <= committed_known:
                        write = written_set(line)
                        if write is not None:
                            # This try's value, or a later try's of the same
                            # write (values are "n:try:random").
                            now = r["states"][victim.id].get(write[0])
                            if now is None or int(now.split(":")[1]) < int(write[1].split(":")[1]):
                                raise Failure(
                                    f"group {name}: entry {index} of node {victim.id}'s log as recovered after the kill, "
                                    f"committed, is not in the state machines: {line}"
                                )
                            in_state += 1
                    continue
                if len(theirs) != 1:
                    raise Failure(f"group {name}: entry {index} differs between the surviving nodes' logs")
                compared += 1
                if line != theirs.pop():
                    if index <= committed_known:
                        raise Failure(
                            f"group {name}: entry {index} of node {victim.id}'s log as recovered after the kill differs "
                            f"from the cluster's, at or below the index known committed ({committed_known}): {line}"
                        )
                    replaced += 1
            recovered_range = f"{min(recovered_entries)}..{max(recovered_entries)}"
            if compared + in_state == 0 or committed_known not in recovered_entries:
                raise Failure(
                    f"group {name}: node {victim.id}'s recovered log ({recovered_range}) was not compared: "
                    f"{compared} of its entries are in the other nodes' logs, and it "
                    f"{'holds' if committed_known in recovered_entries else 'lacks'} index {committed_known} "
                    "known committed (raise --keep-before-snapshot?)"
                )
            total_compared += compared + in_state
            role = "leader" if before[prefix]["leader"] is victim else "follower"
            print(
                f"round {number} group {name}: {len(r['acked'])} writes acknowledged, all on each of the 3 nodes "
                f"(state machines equal, {args.reads} linearizable reads right), each once in each node's log "
                f"({once} found over the 3 logs); logs end at {lasts[1]} on every node, entries {lo}..{hi} equal on all; "
                f"node {victim.id} ({role} here) caught up {'by a snapshot' if r['by_snapshot'] else 'from the log'}; "
                f"its log as recovered after the kill: {recovered_range}, flushed at least to {before[prefix]['flushed']} "
                f"before the kill (held), {compared} entries compared with the others', equal up to index "
                f"{committed_known} known committed, {replaced} after it replaced by the new leader, "
                f"{in_state} purged from the others' logs found in their state machines",
                flush=True,
            )
        print(
            f"round {number}: {total_acked} writes acknowledged over {len(prefixes)} group(s) "
            f"({unknown} tries got no answer: node down or mid-write, retried), none lost; "
            f"node {victim.id} caught up {caught_up_s:.1f} s after its restart; "
            f"{total_compared} entries of its recovered logs compared",
            flush=True,
        )
        ok = True
        return {
            "takeovers": takeovers,
            "first_acks": first_acks,
            "acked": total_acked,
            "compared": total_compared,
            "elections": max([before[p].get("elections", 1) for p in led] or [1]),
        }
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
    p.add_argument("--groups", type=int, default=4, help="Raft groups per node, on one shared log (4)")
    p.add_argument("--own-log", action="store_true", help="one group per node, on a log store of its own")
    p.add_argument("--clients", type=int, default=4, help="concurrent writers per group (4)")
    p.add_argument("--before", type=float, default=8, help="seconds of load before the kill (8)")
    p.add_argument("--after", type=float, default=8, help="seconds of load before the killed node restarts (8)")
    p.add_argument("--rejoin", type=float, default=4, help="seconds of load after it restarts (4)")
    p.add_argument("--reads", type=int, default=50, help="linearizable reads checked per group (50)")
    p.add_argument(
        "--quick", action="store_true",
        help="short phases (3 s before the kill, 3 s after, 1 s after the restart, 10 reads): "
        "a round in about half a minute",
    )
    p.add_argument("--heartbeat-ms", type=int, default=50, help="(50; openraft checks election timers every 1.5 heartbeats)")
    p.add_argument("--election-min-ms", type=int, default=250, help="(250)")
    p.add_argument("--election-max-ms", type=int, default=1000, help="(1000; also openraft's leader lease)")
    p.add_argument("--snapshot-every", type=int, default=2000, help="entries between snapshots (2000)")
    p.add_argument(
        "--keep-before-snapshot", type=int, default=10000,
        help="entries kept before a snapshot (10000: the logs compared reach back past the kill; "
        "a few hundred has the killed node catch up by a snapshot instead)",
    )
    p.add_argument("--segment-bytes", type=int, default=64 << 10, help="log segment size (64 KiB)")
    p.add_argument("--keep", action="store_true", help="keep the node directories")
    args = p.parse_args()
    if args.quick:
        args.before, args.after, args.rejoin, args.reads = 3, 3, 1, 10
    if args.own_log:
        args.group_ids, args.prefixes = [None], [""]
    else:
        if args.groups < 1:
            p.error("--groups must be at least 1")
        args.group_ids = list(range(args.groups))
        args.prefixes = [f"/groups/{g}" for g in args.group_ids]

    started = time.monotonic()
    results = []
    try:
        for number in range(1, args.rounds + 1):
            results.append(run_round(args, number))
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    takeovers = sorted(t for r in results for t in r["takeovers"])
    acks = sorted(t for r in results for t in r["first_acks"])
    print(
        f"PASS: {len(results)} round(s) of {len(args.prefixes)} group(s) in {time.monotonic() - started:.0f} s, "
        f"{sum(r['acked'] for r in results)} acknowledged writes, none lost; "
        f"{sum(r['compared'] for r in results)} entries of the killed nodes' recovered logs compared; "
        f"takeover {takeovers[0]:.0f}..{takeovers[-1]:.0f} ms (median {takeovers[len(takeovers) // 2]:.0f}) "
        f"in the {len(takeovers)} group(s) the killed nodes led, "
        f"first write there after the kill {acks[0]:.0f}..{acks[-1]:.0f} ms, "
        f"bound {4 * args.election_max_ms} ms; "
        f"{sum(1 for r in results if r['elections'] > 1)} round(s) needed more than one election"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
