"""POST /v1/chat/completions: the agent as an OpenAI-compatible model. A request's messages are its
conversation (see _chat.read_messages), or a conversation the service keeps names it
(_conversations); the reply is a chat completion, whole or streamed, whose text ends with the
sources and whose `agentic_rag` object says how the run went."""
from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ..core import source_line
from ..loop import history_messages
from ._ask import Asking, streamed
from ._chat import Asked, answer_reason, read_messages
from ._conversations import Claim, ConversationError, ConversationStore
from ._http import MODEL_ID, RETRY, SCOPE, Reply, ServiceError, log, read_json
from ._parts import Parts
from ._schemas import AskRequest, ChatRequest, RunSettings


class ChatEndpoint:
    """The chat endpoint of one service: its runs (`asking`), cache and limits are the service's; the
    conversations it keeps are in `conversations`."""

    def __init__(self, parts: Parts, asking: Asking, conversations: ConversationStore):
        self.parts, self.asking, self.conversations = parts, asking, conversations

    def reply(self, environ: dict) -> Reply:
        """OpenAI-compatible: `messages` is the conversation (the last user message is the question,
        the user and assistant turns before it its history, system messages its instructions), or
        `conversation_id` names a conversation the service keeps (`"conversation": true` starts one);
        `max_tokens` lowers the completion limit. The reply text ends with the sources, which also come
        as `citations`; `agentic_rag` holds the stop reason, the standalone question and the
        conversation's id. Streaming sends only the checked answer."""
        parts, bounds = self.parts, self.parts.limits
        data = read_json(environ, bounds.max_body_bytes)
        asked = read_messages(data.get("messages"), bounds.max_messages, bounds.max_instruction_chars)
        request = ChatRequest.model_validate(data)
        if request.model not in (MODEL_ID, parts.access.name if SCOPE in environ else MODEL_ID):
            raise ServiceError(404, "model_not_found", f"model {request.model!r} does not exist; use {MODEL_ID!r}")
        if not asked.question.strip():
            raise ServiceError(400, "invalid_request", "the last user message has no text: it is the question")
        limits = [n for n in (request.max_tokens, request.max_completion_tokens) if n is not None]
        settings = RunSettings(max_completion_tokens=min(limits)) if limits else RunSettings()
        claim = self._claim(environ, request, asked)
        try:
            history = claim.turns if claim else history_messages(asked.history)[0]
            question = AskRequest(question=asked.question, settings=settings)
            ready = self.asking.prepare(question, history, asked.instructions, parts.access.scope_filter(environ))
        except BaseException:
            self._release(claim)
            raise
        chat_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if request.stream:
            return 200, self._stream(ready, claim, chat_id, created, request.model), []
        reply = self._turn(ready, claim)
        return 200, {"id": chat_id, "object": "chat.completion", "created": created, "model": request.model,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": _with_sources(reply)},
                                  "finish_reason": "stop"}],
                     "usage": _usage(reply), "citations": reply["citations"], "agentic_rag": _extra(reply, claim)}, []

    def _claim(self, environ: dict, request: ChatRequest, asked: Asked) -> Claim | None:
        """The conversation this turn belongs to, held for it (None: a conversation of its messages
        alone). Bound to the request's key ("no key" when the service has none): another key's is
        not found. With conversation_id the service holds the history, so the request holds none."""
        key = self.parts.access.owner_key(environ)
        if request.conversation_id is None:
            return self.conversations.new(key, history_messages(asked.history)[0]) if request.conversation else None
        if asked.history:
            raise ServiceError(400, "invalid_request", "with conversation_id send only the new user message (and "
                                                       "any system message): the service keeps the history; or "
                                                       "send the whole conversation without conversation_id")
        try:
            return self.conversations.claim(request.conversation_id, key, self.parts.config.deadline_s + 30)
        except ConversationError as exc:
            retry = [("Retry-After", "1")] if exc.status == 409 else []
            raise ServiceError(exc.status, exc.kind, str(exc), retry) from None
        except sqlite3.Error as exc:
            raise self._store_failed(exc) from None

    def _turn(self, ready: dict, claim: Claim | None) -> dict:
        """The turn's reply (see Asking.finish), kept in its conversation before it is sent; the
        conversation is freed whatever happens."""
        try:
            reply = self.asking.finish(ready)
            if claim is not None:
                self.conversations.save(claim, reply)
                claim.token = None  # saved: nothing left to free
            return reply
        except sqlite3.Error as exc:
            raise self._store_failed(exc) from None
        finally:
            self._release(claim)

    def _release(self, claim: Claim | None) -> None:
        if claim is not None and claim.token is not None:
            try:
                self.conversations.release(claim)
            except sqlite3.Error as exc:  # its claim lapses by itself after the run's deadline
                log.error("conversation %s was not freed: %s", claim.id, exc)

    def _store_failed(self, exc: sqlite3.Error) -> ServiceError:
        log.error("the conversation store failed: %s", exc)
        full = "full" in str(exc)
        return ServiceError(507 if full else 503, "insufficient_storage" if full else "unavailable",
                            f"the conversation store failed ({self.parts.served.public(str(exc))}); retry", RETRY)

    def _stream(self, ready: dict, claim: Claim | None, chat_id: str, created: int,
                model: str = MODEL_ID) -> Iterator[bytes]:
        """chat.completion.chunk events: the role, the checked answer in pieces, the sources, then [DONE]
        (the draft is not sent: a streamed token cannot be taken back when the checks change it). The
        turn is kept in its conversation by the run's thread, even if the client goes away."""
        items = streamed(lambda on_token: self._turn(ready, claim), ready["trace_context"])

        def chunk(delta: dict, finish: str | None = None, **extra: Any) -> bytes:
            body = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        while (item := items.get()) is not None:
            kind, value = item
            if kind == "error":
                yield f"data: {json.dumps({'error': {'type': value[1], 'message': value[2]}})}\n\n".encode()
            elif kind == "answer":
                text = _with_sources(value)
                for start in range(0, len(text), 64):
                    yield chunk({"content": text[start:start + 64]})
                yield chunk({}, "stop", usage=_usage(value), citations=value["citations"],
                            agentic_rag=_extra(value, claim))
        yield b"data: [DONE]\n\n"


def _extra(reply: dict, claim: Claim | None) -> dict:
    """A chat reply's `agentic_rag` object (schema: ChatExtra)."""
    return {**{k: reply[k] for k in ("stop_reason", "abstained", "generation", "cached", "standalone")},
            "conversation_id": claim.id if claim else None, "answer_reason": answer_reason(reply)}


def _with_sources(reply: dict) -> str:
    lines = [f"[{c['n']}] {source_line(c)}" for c in reply["citations"]]
    return reply["answer"] + ("\n\nSources:\n" + "\n".join(lines) if lines else "")


def _usage(reply: dict) -> dict:
    usage = reply["usage"]
    return {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
