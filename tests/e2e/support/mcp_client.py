"""The official Python MCP SDK against a room: lists its tools and runs a
command, in the SDK's default mode; prints what it saw as JSON."""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=60.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            ran = await client.call_tool("run_command", {"command": "echo from-python"})
            said = ran.structured_content or {}
            print(json.dumps({
                "tools": [tool.name for tool in tools.tools],
                "exitCode": said.get("exitCode"),
                "stdout": said.get("stdout"),
            }))


asyncio.run(main(sys.argv[1], sys.argv[2]))
