"""The `deepagents-acp` runtime adapter: one ACP agent process and session per run (contract 5.5).

ACP is JSON-RPC 2.0 as newline-delimited JSON over the agent's stdin/stdout. The bridge starts the
configured command without a shell, initializes, opens a session, sends the prompt and collects
the agent's message chunks until the prompt's answer arrives. The whole turn has one deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.support.facts import CallFailure
from bridge.support.redaction import redact_text
from common.jsonrpc import METHOD_NOT_FOUND

PROTOCOL_VERSION = 1
STDERR_BYTES = 4096
SHUTDOWN_SECONDS = 0.75  # after SIGTERM, then again after SIGKILL
LINE_LIMIT = 8 * 1024 * 1024  # one stdout line; a longer one fails the run as invalid output
CLIENT_INFO = {"name": "llmwiki-agent-bridge"}
CLIENT_CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}


class AcpFailure(CallFailure):
    """The ACP turn failed. `message` is safe; the other fields feed the runtime diagnostic."""

    def __init__(self, message: str, *, timeout: bool = False, invalid_json: bool = False,
                 exit_code: int | None = None, signal_name: str | None = None, stderr: str = "",
                 stderr_truncated: bool = False) -> None:
        super().__init__(message, timeout=timeout, invalid_json=invalid_json)
        self.exit_code = exit_code
        self.signal_name = signal_name
        self.stderr = stderr
        self.stderr_truncated = stderr_truncated


class _Failed(Exception):
    """Raised inside the turn; turned into an AcpFailure with the process facts at the end."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Conversation:
    """The bridge's side of the JSON-RPC stream with one agent process."""

    process: asyncio.subprocess.Process
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    chunks: list[str] = field(default_factory=list)
    stderr: bytearray = field(default_factory=bytearray)
    stderr_truncated: bool = False
    invalid_json: bool = False
    next_id: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8") + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        try:
            self._write({"id": self.next_id, "method": method, "params": params})
            assert self.process.stdin is not None
            await self.process.stdin.drain()
        except (ConnectionError, RuntimeError):
            raise _Failed("DeepAgents ACP process exited before completing.") from None
        return await future

    async def read_stdout(self) -> None:
        assert self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                self._receive(line)
        except ValueError:  # a line past the reader's limit
            self.invalid_json = True
        finally:
            self.closed.set()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(_Failed("DeepAgents ACP process exited before completing."))

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(4096):
            room = STDERR_BYTES - len(self.stderr)
            if len(chunk) > room:
                self.stderr_truncated = True
            self.stderr += chunk[:max(room, 0)]  # keep draining: a full pipe would stall the agent

    def _receive(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            self.invalid_json = True  # dropped, as the contract says, but remembered
            return
        if not isinstance(message, dict):
            self.invalid_json = True
            return
        method = message.get("method")
        if isinstance(method, str):
            self._agent_call(method, message)
            return
        rid = message.get("id")
        future = self.pending.pop(rid, None) if isinstance(rid, int) else None
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(_Failed("DeepAgents ACP process failed."))
        else:
            future.set_result(message.get("result"))

    def _agent_call(self, method: str, message: dict[str, Any]) -> None:
        """Session updates carry the answer; permission requests are always cancelled."""
        params = _object(message.get("params"))
        if method == "session/update":
            update = _object(params.get("update"))
            content = _object(update.get("content"))
            if (update.get("sessionUpdate") == "agent_message_chunk" and content.get("type") == "text"
                    and isinstance(content.get("text"), str)):
                self.chunks.append(content["text"])
            return
        if "id" not in message:
            return  # another notification: nothing to answer
        if method == "session/request_permission":
            self._write({"id": message["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        else:  # the bridge offers the agent no files, terminals or anything else
            self._write({"id": message["id"],
                         "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}})

    async def turn(self, prompt: str, cwd: Path) -> str:
        initialized = await self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": CLIENT_INFO})
        if not isinstance(initialized, dict) or initialized.get("protocolVersion") != PROTOCOL_VERSION:
            raise _Failed("DeepAgents ACP process negotiated an unsupported protocol version.")
        session = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id = session.get("sessionId") if isinstance(session, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise _Failed("DeepAgents ACP process failed.")
        await self.request("session/prompt", {"sessionId": session_id,
                                              "prompt": [{"type": "text", "text": prompt}]})
        return "".join(self.chunks)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    """Contract 5.4: each message as `# <role>` and its content, separated by blank lines."""
    return "\n\n".join(f"# {m['role']}\n{m['content']}" for m in messages)


async def acp_answer(command: str, args: Sequence[str], cwd: Path, prompt: str,
                     timeout_seconds: float) -> str:
    """The agent's answer text for one prompt. Raises AcpFailure; the process is always gone after."""
    try:
        process = await asyncio.create_subprocess_exec(
            command, *args, cwd=cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, limit=LINE_LIMIT, start_new_session=True)
    except (OSError, ValueError):
        raise AcpFailure("DeepAgents ACP process could not start.") from None
    conversation = _Conversation(process)
    readers = [asyncio.create_task(conversation.read_stdout()),
               asyncio.create_task(conversation.read_stderr())]
    message: str | None = None
    timed_out = False
    try:
        async with asyncio.timeout(timeout_seconds):
            return await conversation.turn(prompt, cwd)
    except TimeoutError:
        timed_out, message = True, "DeepAgents ACP request timed out."
    except _Failed as exc:
        message = exc.message
    finally:
        await _stop(process)
        await asyncio.wait(readers, timeout=SHUTDOWN_SECONDS)
        for reader in readers:
            reader.cancel()
    if conversation.invalid_json and not timed_out:
        message = "DeepAgents ACP process produced invalid JSON."
    code = process.returncode
    raise AcpFailure(
        message or "DeepAgents ACP process failed.", timeout=timed_out,
        invalid_json=conversation.invalid_json,
        exit_code=code if code is not None and code >= 0 else None,
        signal_name=signal.Signals(-code).name if code is not None and code < 0 else None,
        stderr=redact_text(conversation.stderr.decode("utf-8", "replace")).strip(),
        stderr_truncated=conversation.stderr_truncated)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin and give the agent a grace period to exit, then SIGTERM, again, SIGKILL
    (contract 5.5). The first wait matters: signalling makes the process object poll, which can
    reap an agent that just exited before asyncio's child watcher does, and the exit status is
    then lost (reported as 255)."""
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    for send in (None, process.terminate, process.kill):
        if process.returncode is not None:
            return
        if send is not None:
            with contextlib.suppress(ProcessLookupError):  # exited already: wait() still collects it
                send()
        try:
            async with asyncio.timeout(SHUTDOWN_SECONDS):
                await process.wait()
            return
        except TimeoutError:
            continue
