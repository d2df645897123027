#!/usr/bin/env python3
"""A minimal HTTP CONNECT proxy, for the test that FCM traffic honours HTTPS_PROXY.

    connect-proxy.py LOG   # prints the port it listens on; appends "CONNECT host:port" to LOG
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def handle(reader, writer, log):
    request = (await reader.readline()).decode().split()
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    if len(request) != 3 or request[0] != "CONNECT":
        writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
        writer.close()
        return
    with open(log, "a") as file:
        file.write(f"CONNECT {request[1]}\n")
    host, port = request[1].rsplit(":", 1)
    upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await writer.drain()
    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


async def main():
    log = sys.argv[1]
    server = await asyncio.start_server(lambda r, w: handle(r, w, log), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
