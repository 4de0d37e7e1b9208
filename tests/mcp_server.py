"""A small MCP server for tests/test_mcp.py, written with the official SDK: stdio by default,
streamable HTTP on 127.0.0.1 with `--http PORT` (endpoint /mcp)."""
import os, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer('passepartout-tests')


@server.tool()
def add(a: int, b: int) -> int:
    "Add two numbers."
    return a + b


@server.tool()
def send_note(to: str, text: str) -> str:
    "Send a note to someone."
    return f"sent to {to}: {text}"


@server.tool()
def pid() -> int:
    "The server's process id."
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    "Always fails, saying why."
    from mcp.server.mcpserver.exceptions import ToolError
    raise ToolError(reason)


if __name__ == '__main__':
    if sys.argv[1:2] == ['--http']: server.run('streamable-http', host='127.0.0.1', port=int(sys.argv[2]))
    else: server.run()
