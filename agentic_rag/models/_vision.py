"""Image descriptions from a vision-capable model behind an OpenAI-compatible endpoint, made at index
time for images that come with none, and cached by the image's content hash."""
from __future__ import annotations

import base64
import hashlib
import logging
import mimetypes
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import Endpoint, call_error, make_client, send

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger("agentic_rag")

PROMPT = ("Describe this image for a search index, in the language of any text it shows (else English): what it "
          "shows, every piece of text in it word for word, names, numbers and labels. Plain text, at most 150 words.")


class ImageDescriber:
    """`describer(path, data)` -> the model's description of the image. Each description is kept in
    `cache_dir` as MODEL-SHA256.txt (written atomically), so the same image is never described twice
    by the same model, whatever its file is called."""

    def __init__(self, model: str, endpoint: Endpoint | None = None, cache_dir: str | Path | None = None):
        self.model, self.endpoint = model, endpoint or Endpoint()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._client: openai.OpenAI | None = None
        self.calls = 0  # descriptions asked of the model (not found in the cache)

    def _cached(self, data: bytes) -> Path | None:
        if self.cache_dir is None:
            return None
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model)
        return self.cache_dir / f"{slug}-{hashlib.sha256(data).hexdigest()}.txt"

    def __call__(self, path: str | Path, data: bytes) -> str:
        cached = self._cached(data)
        if cached is not None and cached.is_file():
            return cached.read_text(encoding="utf-8")
        import openai

        mime = mimetypes.guess_type(str(path))[0] or "image/png"
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        client = self._client = self._client or make_client(self.endpoint)
        try:
            messages: list[ChatCompletionMessageParam] = [
                {"role": "user", "content": [{"type": "text", "text": PROMPT},
                                             {"type": "image_url", "image_url": {"url": url}}]}]
            reply = send(self.endpoint, f"describing {Path(path).name}", None,  # at indexing: no run's deadline
                         lambda timeout: client.chat.completions.create(model=self.model, messages=messages,
                                                                          timeout=timeout))
        except openai.OpenAIError as exc:
            raise call_error(exc, f"describing {Path(path).name} with {self.model}", self.endpoint) from None
        self.calls += 1
        text = (reply.choices[0].message.content or "").strip() if reply.choices else ""
        if text and cached is not None:
            self._keep(cached, text)
        return text

    @staticmethod
    def _keep(cached: Path, text: str) -> None:
        """Write a description to the cache atomically; a cache that cannot be written costs a warning only."""
        out = None
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=cached.parent, delete=False) as out:
                out.write(text)
            os.replace(out.name, cached)
        except OSError as exc:
            log.warning("image description not cached in %s: %s", cached.parent, exc.strerror or exc)
            if out is not None:
                Path(out.name).unlink(missing_ok=True)
