"""The official Python MCP SDK against a room, in the SDK's default mode:
with a writer's token it lists the tools, runs a command and reads the
history, and starts a job, reads its status and stops it; with a
watcher's, it lists the tools and is refused a command.
Prints what it saw as JSON."""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def session(url: str, token: str, act):
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=60.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            return [tool.name for tool in tools.tools], await act(client)


async def as_writer(client):
    ran = await client.call_tool("run_command", {"command": "echo from-python"})
    started = await client.call_tool("start_job", {"cmd": "sleep 30"})
    job = lambda result: (result.structured_content or {}).get("job") or {}
    job_id = {"jobId": job(started).get("id")}
    status = await client.call_tool("job_status", job_id)
    stopped = await client.call_tool("stop_job", job_id)
    history = await client.call_tool("read_history", {})
    said = ran.structured_content or {}
    return {
        "exitCode": said.get("exitCode"),
        "stdout": said.get("stdout"),
        "started": job(started),
        "status": job(status),
        "stopped": job(stopped),
        "history": (history.structured_content or {}).get("messages"),
    }


async def as_watcher(client):
    refused = await client.call_tool("run_command", {"command": "echo no"})
    return {"isError": refused.is_error, "text": refused.content[0].text}


async def main(url: str, writer: str, watcher: str) -> None:
    tools, wrote = await session(url, writer, as_writer)
    watcher_tools, watched = await session(url, watcher, as_watcher)
    print(json.dumps({"tools": tools, **wrote, "watcherTools": watcher_tools, "refused": watched}))


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
