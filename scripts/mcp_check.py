"""A second, independent MCP client against the-loop's `/mcp`: the official Python SDK.

Run by scripts/mcp-check.sh against a running service. Lists the tools, reads with
`list_work_items` and `get_work_item`, and checks that `link_pull_request` without a
session record is refused as a tool error (not a protocol error). Exit 0 only if all hold.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

WANTED = {"ask", "link_pull_request", "get_work_item", "list_work_items", "query_events", "explain"}


def text(result):
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


async def main(url):
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            info = await session.initialize()
            assert info.server_info.name == "the-loop", info.server_info
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert WANTED <= names, f"missing tools: {WANTED - names}"
            listed = await session.call_tool("list_work_items", {})
            assert not listed.is_error, text(listed)
            assert json.loads(text(listed)) == [], text(listed)
            item = await session.call_tool("get_work_item", {"work_item": "github:octo/app#1"})
            assert not item.is_error, text(item)
            assert json.loads(text(item))["session"] is None, text(item)
            refused = await session.call_tool(
                "link_pull_request", {"work_item": "github:octo/app#1", "pull_request": 2}
            )
            assert refused.is_error, "link_pull_request without a session must be refused"
            assert "no session record" in text(refused), text(refused)
            bad = await session.call_tool("get_work_item", {"work_item": "octo/app#1"})
            assert bad.is_error and "not a work-item ref" in text(bad), text(bad)
    print(f"mcp-check: {len(names)} tools, reads answered, refusals are tool errors")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
