"""Stream fan-out bench for scripts/bench-api.sh (stdlib only).

Opens CLIENTS connections to GET /api/v1/stream, then appends RATE lines a second for
SECONDS to the event log the way another process does (flock on the sidecar lock, one
O_APPEND write per line), each line numbered. Every client reads the Server-Sent Events
off its socket (HTTP/1.1 chunked) and keeps the numbers of the `log` frames it got.
Prints, per run: lines written, and for all clients together the frames lost, reordered
and duplicated, and the write-to-frame latency p50/p99/max.

usage: bench_stream.py PORT EVENT_LOG CLIENTS RATE SECONDS
"""

import asyncio
import fcntl
import json
import os
import sys
import time


async def client(port, ready, got):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise SystemExit(f"the stream refused: {head!r}")
    ready.set()
    buffer = b""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.strip(), 16)
        if size == 0:
            return
        buffer += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            fields = dict(
                line.split(b": ", 1) for line in block.split(b"\n") if b": " in line and not line.startswith(b":")
            )
            if fields.get(b"event") != b"log":
                continue
            record = json.loads(fields[b"data"])
            if record.get("event") != "config.reloaded" or "bench" not in record:
                continue
            got.append((record["bench"], time.time() - record["sent"]))
            if record["bench"] == -1:
                return


def write(log, rate, seconds):
    lock = os.open(log + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    total = rate * seconds
    start = time.time()

    def line(n):
        record = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "source": "bench",
            "event": "config.reloaded",
            "level": "info",
            "pid": os.getpid(),
            "bench": n,
            "sent": time.time(),
            "work_item": "github:octo/app#%d" % (n % 100 + 1),
        }
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.write(out, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        fcntl.flock(lock, fcntl.LOCK_UN)

    for n in range(total):
        due = start + n / rate
        pause = due - time.time()
        if pause > 0:
            time.sleep(pause)
        line(n)
    elapsed = time.time() - start
    line(-1)
    return total, elapsed


async def main():
    port, log, clients, rate, seconds = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    readies = [asyncio.Event() for _ in range(clients)]
    received = [[] for _ in range(clients)]
    tasks = [asyncio.create_task(client(int(port), readies[i], received[i])) for i in range(clients)]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 10)
    total, elapsed = await asyncio.to_thread(write, log, rate, seconds)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    lost = reordered = duplicated = 0
    latencies = []
    for got in received:
        numbers = [n for n, _ in got if n >= 0]
        latencies.extend(lat for n, lat in got if n >= 0)
        lost += total - len(set(numbers))
        duplicated += len(numbers) - len(set(numbers))
        reordered += sum(1 for a, b in zip(numbers, numbers[1:]) if b < a)
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    print(f"stream: {clients} clients, {total} lines written in {elapsed:.2f}s ({total / elapsed:.0f} lines/s)")
    print(f"stream: frames expected {total * clients}, lost {lost}, reordered {reordered}, duplicated {duplicated}")
    print(f"stream: write-to-frame latency p50 {pick(0.5):.1f} ms, p99 {pick(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    return 1 if lost or reordered or duplicated else 0


sys.exit(asyncio.run(main()))
