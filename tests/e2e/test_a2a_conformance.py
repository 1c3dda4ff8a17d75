"""A2A 1.0 conformance of the installed services, one test per requirement, on both bindings:
version negotiation, the task operations, follow-up checks, refusals of what is not declared (in
the spec's shape per binding), request validation, the card's caching headers and both JSON-RPC
URL forms. serve (with --enable-a2a) and the bridge (evidence-only over that serve) alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SAMPLE_WIKI
from tests.e2e.processes import Service, start_bridge, start_serve, stop_checked

QUESTION = "How do we roll back a release?"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
V1 = {"A2A-Version": "1.0"}


@dataclass
class Agent:
    name: str
    url: str

    def rpc(self, method: str, params: Any, headers: dict[str, str] | None = None,
            path: str = "/a2a/jsonrpc") -> dict[str, Any]:
        response = httpx.post(self.url + path, headers={**V1, **(headers or {})}, timeout=60,
                              json={"jsonrpc": "2.0", "id": "r1", "method": method, "params": params})
        assert response.status_code == 200, response.text  # JSON-RPC errors ride on HTTP 200
        body = response.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == "r1"
        return dict(body)

    def rest(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, headers={**V1, **(headers or {})},
                             timeout=60)


def message(text: str = QUESTION, **extra: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **extra}


@pytest.fixture(scope="module")
def serve_agent(our_serve: Service) -> Agent:
    return Agent("serve", our_serve.url)


@pytest.fixture(scope="module")
def bridge_agent(tmp_path_factory: pytest.TempPathFactory, our_serve: Service) -> Iterator[Agent]:
    settings = {"sources": [{"id": "wiki", "protocol": "llmwiki-http", "url": our_serve.url}]}
    service = start_bridge(tmp_path_factory.mktemp("a2a-bridge"), "--default-mode", "evidence-only",
                           settings=settings)
    yield Agent("bridge", service.url)
    stop_checked(service)


@pytest.fixture(params=["serve", "bridge"])
def agent(request: pytest.FixtureRequest) -> Agent:
    return request.getfixturevalue(f"{request.param}_agent")  # type: ignore[no-any-return]


def rpc_error(body: dict[str, Any], code: int, reason: str | None) -> dict[str, Any]:
    assert "result" not in body, body
    error = body["error"]
    assert error["code"] == code, error
    if reason is not None:
        assert {"@type": ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org"}.items() <= \
            error["data"][0].items()
    return dict(error)


def rest_error(response: httpx.Response, status: int, google_status: str,
               reason: str | None) -> dict[str, Any]:
    """AIP-193: `{"error": {"code", "status", "message", "details": [ErrorInfo, ...]}}`."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["status"] == google_status and error["message"]
    if reason is not None:
        assert error["details"][0]["@type"] == ERROR_INFO and error["details"][0]["reason"] == reason
    return dict(error)


# -- version negotiation (spec 3.6.2) -------------------------------------------------------

def test_an_unknown_a2a_version_is_refused_on_both_bindings(agent: Agent) -> None:
    body = agent.rpc("SendMessage", {"message": message()}, {"A2A-Version": "99.0"})
    rpc_error(body, -32009, "VERSION_NOT_SUPPORTED")
    response = agent.rest("POST", "/message:send", {"message": message()}, {"A2A-Version": "99.0"})
    rest_error(response, 400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED")


def test_no_version_header_keeps_todays_answer(agent: Agent) -> None:
    response = httpx.post(agent.url + "/a2a/jsonrpc", timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message()}})
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- tasks (spec 3.1.3-3.1.5) ----------------------------------------------------------------

def test_a_sent_task_is_kept_for_get_list_and_cancel(agent: Agent) -> None:
    context = f"ctx-{uuid.uuid4()}"
    first = agent.rpc("SendMessage", {"message": message(contextId=context)})["result"]["task"]
    second = agent.rest("POST", "/message:send", {"message": message(contextId=context)}).json()["task"]
    assert first["id"] != second["id"] and first["contextId"] == second["contextId"] == context

    fetched = agent.rpc("GetTask", {"id": first["id"]})["result"]
    assert fetched["id"] == first["id"] and fetched["artifacts"] == first["artifacts"]
    rest_fetched = agent.rest("GET", f"/tasks/{second['id']}")
    assert rest_fetched.status_code == 200 and rest_fetched.json()["artifacts"] == second["artifacts"]
    assert "history" not in agent.rest("GET", f"/tasks/{first['id']}?historyLength=0").json()

    page = agent.rpc("ListTasks", {"contextId": context, "pageSize": 1, "includeArtifacts": True})["result"]
    assert [t["id"] for t in page["tasks"]] == [second["id"]]  # newest status first
    assert page["totalSize"] == 2 and page["pageSize"] == 1 and page["nextPageToken"]
    rest_page = agent.rest("GET", f"/tasks?contextId={context}&pageSize=1&pageToken={page['nextPageToken']}")
    last = rest_page.json()
    assert [t["id"] for t in last["tasks"]] == [first["id"]] and last["nextPageToken"] == ""
    assert "artifacts" not in last["tasks"][0]  # includeArtifacts defaults to false

    rpc_error(agent.rpc("CancelTask", {"id": first["id"]}), -32002, "TASK_NOT_CANCELABLE")
    rest_error(agent.rest("POST", f"/tasks/{second['id']}:cancel"), 409, "FAILED_PRECONDITION",
               "TASK_NOT_CANCELABLE")


def test_unknown_tasks_are_task_not_found(agent: Agent) -> None:
    rpc_error(agent.rpc("GetTask", {"id": "no-such-task"}), -32001, "TASK_NOT_FOUND")
    rpc_error(agent.rpc("CancelTask", {"id": "no-such-task"}), -32001, "TASK_NOT_FOUND")
    rest_error(agent.rest("GET", "/tasks/no-such-task"), 404, "NOT_FOUND", "TASK_NOT_FOUND")
    rest_error(agent.rest("POST", "/tasks/no-such-task:cancel"), 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_follow_ups_name_a_known_task_of_the_same_context(agent: Agent) -> None:
    """3.4.2: an unknown taskId is TaskNotFound; 3.4.3: a mismatched contextId is refused; a
    finished task takes no further message (UnsupportedOperation)."""
    rpc_error(agent.rpc("SendMessage", {"message": message(taskId="no-such-task")}), -32001,
              "TASK_NOT_FOUND")
    task = agent.rpc("SendMessage", {"message": message()})["result"]["task"]
    mismatched = message(taskId=task["id"], contextId="another-context")
    rpc_error(agent.rpc("SendMessage", {"message": mismatched}), -32602, None)
    rest_error(agent.rest("POST", "/message:send", {"message": mismatched}), 400, "INVALID_ARGUMENT", None)
    rpc_error(agent.rpc("SendMessage", {"message": message(taskId=task["id"])}), -32004,
              "UNSUPPORTED_OPERATION")


# -- what neither card declares (spec 3.3.4) -------------------------------------------------

def test_push_notifications_are_refused_on_both_bindings(agent: Agent) -> None:
    config = {"taskId": "t", "url": "http://127.0.0.1:9/hook"}
    rpc_error(agent.rpc("CreateTaskPushNotificationConfig", config), -32003,
              "PUSH_NOTIFICATION_NOT_SUPPORTED")
    rpc_error(agent.rpc("ListTaskPushNotificationConfigs", {"taskId": "t"}), -32003,
              "PUSH_NOTIFICATION_NOT_SUPPORTED")
    for method, path in (("POST", "/tasks/t/pushNotificationConfigs"),
                         ("GET", "/tasks/t/pushNotificationConfigs"),
                         ("GET", "/tasks/t/pushNotificationConfigs/c"),
                         ("DELETE", "/tasks/t/pushNotificationConfigs/c")):
        rest_error(agent.rest(method, path, config if method == "POST" else None), 400, "UNIMPLEMENTED",
                   "PUSH_NOTIFICATION_NOT_SUPPORTED")


def test_the_extended_card_is_refused_on_both_bindings(agent: Agent) -> None:
    rpc_error(agent.rpc("GetExtendedAgentCard", {}), -32004, "UNSUPPORTED_OPERATION")
    rest_error(agent.rest("GET", "/extendedAgentCard"), 400, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION")


# -- validation before anything runs (spec 3.3.2) --------------------------------------------

@pytest.mark.parametrize("params", [
    {}, {"message": "hi"}, {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "y"}]}},
], ids=["no-message", "message-string", "no-message-id", "no-parts", "two-kinds-in-a-part"])
def test_invalid_send_message_requests_are_refused(agent: Agent, params: dict[str, Any]) -> None:
    rpc_error(agent.rpc("SendMessage", params), -32602, None)
    rest_error(agent.rest("POST", "/message:send", params), 400, "INVALID_ARGUMENT", None)


def test_bad_json_is_a_400_on_both_bindings(agent: Agent) -> None:
    headers = {**V1, "Content-Type": "application/json"}
    response = httpx.post(agent.url + "/a2a/jsonrpc", content=b"{not json", headers=headers)
    assert response.status_code == 200 and response.json()["error"]["code"] == -32700
    response = httpx.post(agent.url + "/message:send", content=b"{not json", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] in (400, "invalid_json")


def test_the_documented_legacy_message_keeps_working(agent: Agent) -> None:
    response = httpx.post(agent.url + "/message:send", json={"data": {"query": QUESTION}}, timeout=60)
    assert response.status_code == 200
    artifact = response.json()["artifacts"][0]
    assert artifact["parts"][0]["data"]


# -- the card and the endpoint URLs (spec 8.6.1, 9) ------------------------------------------

def test_the_card_is_cacheable_and_revalidates(agent: Agent) -> None:
    response = httpx.get(agent.url + "/.well-known/agent-card.json")
    assert response.status_code == 200
    assert "max-age=" in response.headers["Cache-Control"] and response.headers["ETag"]
    again = httpx.get(agent.url + "/.well-known/agent-card.json",
                      headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304 and again.headers["ETag"] == response.headers["ETag"]


def test_the_bridge_card_declares_its_own_keys_as_an_extension(bridge_agent: Agent) -> None:
    card = httpx.get(bridge_agent.url + "/.well-known/agent-card.json").json()
    assert set(card["capabilities"]) == {"streaming", "pushNotifications", "extensions"}
    [extension] = card["capabilities"]["extensions"]
    assert extension["uri"].startswith("urn:llmwiki:") and extension["required"] is False
    assert extension["params"]["knowledgeSourceProtocols"] == ["llmwiki-http", "mcp", "a2a"]


def test_the_jsonrpc_url_answers_with_a_trailing_slash(agent: Agent) -> None:
    body = agent.rpc("SendMessage", {"message": message()}, path="/a2a/jsonrpc/")
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- the store's bounds ----------------------------------------------------------------------

def test_the_task_store_keeps_at_most_the_configured_count(tmp_path_factory: pytest.TempPathFactory) -> None:
    service = start_serve(tmp_path_factory.mktemp("bounded-serve"), SAMPLE_WIKI, "--enable-a2a",
                          "--a2a-max-tasks", "2")
    try:
        agent = Agent("serve", service.url)
        ids = [agent.rpc("SendMessage", {"message": message()})["result"]["task"]["id"] for _ in range(3)]
        rpc_error(agent.rpc("GetTask", {"id": ids[0]}), -32001, "TASK_NOT_FOUND")  # the oldest went
        assert [agent.rpc("GetTask", {"id": i})["result"]["id"] for i in ids[1:]] == ids[1:]
        assert agent.rpc("ListTasks", {})["result"]["totalSize"] == 2
        logged = service.stderr.read_text(errors="replace")
        assert QUESTION not in logged  # no task text in the logs
    finally:
        stop_checked(service)
