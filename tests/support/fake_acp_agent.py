"""A scripted ACP agent for the deepagents-acp adapter tests: JSON-RPC over stdin/stdout.

Usage: python fake_acp_agent.py MODE RECORD_FILE. It appends every message it receives to
RECORD_FILE (one JSON line each), so a test can check what the bridge sent. MODE picks the script:
  answer      - answer the prompt in two message chunks (after a permission request)
  exit        - write to stderr and exit 42 after initialize
  garbage     - print a non-JSON line, then answer
  hang        - never answer the prompt
  old-version - answer initialize with protocol version 2
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main(mode: str, record: str) -> None:
    permission_asked = False
    for line in sys.stdin:
        message = json.loads(line)
        with open(record, "a", encoding="utf-8") as file:
            file.write(json.dumps(message) + "\n")
        method = message.get("method")
        if method == "initialize":
            if mode == "exit":
                sys.stderr.write("agent crashed: token=sk-live-abcdef123456 at /home/someone/agent\n")
                sys.stderr.flush()
                sys.exit(42)
            send({"id": message["id"], "result": {"protocolVersion": 2 if mode == "old-version" else 1,
                                                  "agentCapabilities": {}}})
        elif method == "session/new":
            send({"id": message["id"], "result": {"sessionId": "session-1"}})
        elif method == "session/prompt":
            if mode == "hang":
                time.sleep(60)
            if mode == "garbage":
                sys.stdout.write("this is not json\n")
            send({"id": 900, "method": "session/request_permission",
                  "params": {"sessionId": "session-1", "options": []}})
            permission_asked = True
            for text in ("The agent says: ", "release after the checklist [1](#citation-1)."):
                send({"method": "session/update", "params": {"sessionId": "session-1", "update": {
                    "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
            prompt_id = message["id"]
        elif message.get("id") == 900 and permission_asked:
            send({"id": prompt_id, "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
