#!/usr/bin/env python3
"""A TCP relay that can freeze its connections, for the HTTP client's stuck-connection tests.

    freezing-relay.py UPSTREAM_PORT   # prints the port it listens on (127.0.0.1)

Every connection to it is relayed to 127.0.0.1:UPSTREAM_PORT. Commands, one a line on stdin,
each answered with one line on stdout:

    freeze   every connection open now stops forwarding, both ways, for good: what arrives is
             read and dropped, so the kernel goes on acknowledging it and the sockets stay open,
             as with a provider that stops answering without closing. Connections made later
             are relayed as usual. Answers "frozen N".
    stats    answers a JSON object: "connections" (ever accepted), and per connection ("list",
             in order of arrival) its id, whether it is frozen, the bytes it carried each way
             ("up": client to server, "down": server to client, counted before any freeze) and
             whether the client has closed it ("client_closed").
"""
import asyncio
import json
import sys


class Connection:
    def __init__(self, number):
        self.number = number
        self.frozen = False
        self.up = 0
        self.down = 0
        self.client_closed = False


connections = []


async def pipe(connection, reader, writer, direction):
    try:
        while data := await reader.read(65536):
            if connection.frozen:
                continue  # read and dropped: acknowledged by the kernel, never answered
            setattr(connection, direction, getattr(connection, direction) + len(data))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        if direction == "up":
            connection.client_closed = True
        if not connection.frozen:
            writer.close()


async def handle(client_reader, client_writer, upstream_port):
    connection = Connection(len(connections) + 1)
    connections.append(connection)
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError:
        client_writer.close()
        connection.client_closed = True
        return
    await asyncio.gather(
        pipe(connection, client_reader, server_writer, "up"),
        pipe(connection, server_reader, client_writer, "down"),
    )


async def commands():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = line.decode().strip()
        if command == "freeze":
            live = [c for c in connections if not c.client_closed]
            for connection in live:
                connection.frozen = True
            print(f"frozen {len(live)}", flush=True)
        elif command == "stats":
            listed = [
                {"id": c.number, "frozen": c.frozen, "up": c.up, "down": c.down, "client_closed": c.client_closed}
                for c in connections
            ]
            print(json.dumps({"connections": len(connections), "list": listed}), flush=True)
        else:
            print(f"unknown command {command!r}", flush=True)


async def main():
    upstream_port = int(sys.argv[1])
    server = await asyncio.start_server(lambda r, w: handle(r, w, upstream_port), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        # Ends when stdin closes (the test is done).
        await commands()


asyncio.run(main())
