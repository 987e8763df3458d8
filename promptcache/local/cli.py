"""``promptcache serve``: run the local reference backend over HTTP with uvicorn.

Binds 127.0.0.1 by default (the backend has no authentication; every API key is just a cache
tenant). Point the official clients at it::

    anthropic.Anthropic(base_url="http://127.0.0.1:8000", api_key="any")
    openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="any")

Exit codes: 0 after a clean shutdown, 2 when the engine cannot be built (bad model path,
device, pool size, missing ``local`` extra), printed as one line.
"""

from __future__ import annotations

import click

__all__ = ["serve_command"]


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option(
    "--model",
    default="random",
    show_default=True,
    help="'random' (a small seeded Llama, no download) or a local Hugging Face "
    "checkpoint directory.",
)
@click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")
@click.option(
    "--pool-mb",
    default=256.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="KV block pool size in MiB.",
)
@click.option(
    "--block-size",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens per KV block.",
)
@click.option(
    "--mode",
    type=click.Choice(["exact", "fast"]),
    default="exact",
    show_default=True,
    help="exact: block-aligned chunked prefill (bit-identical logits); fast: one-shot.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the random model.")
@click.option(
    "--max-body-mb",
    default=32.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Request bodies above this size get 413.",
)
@click.option(
    "--no-prompt-tokens-details",
    is_flag=True,
    help="Leave usage.prompt_tokens_details out of Chat Completions (like vLLM "
    "without --enable-prompt-tokens-details).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
def serve_command(
    host: str,
    port: int,
    model: str,
    device: str | None,
    pool_mb: float,
    block_size: int,
    mode: str,
    seed: int,
    max_body_mb: float,
    no_prompt_tokens_details: bool,
    log_level: str,
) -> None:
    """Serve the local reference backend (Anthropic /v1/messages, OpenAI /v1/chat/completions
    and /v1/responses, /v1/models, /metrics)."""
    try:
        import uvicorn

        from promptcache.local.app import ServerOptions, build_engine, create_app

        engine = build_engine(
            model, device=device, pool_mb=pool_mb, block_size=block_size, mode=mode, seed=seed
        )
    except ImportError as exc:
        raise click.UsageError(
            f"the local backend needs the 'local' extra ({exc}); pip install 'promptcache[local]'"
        ) from None
    except (OSError, ValueError, RuntimeError) as exc:
        click.echo(f"{model}: cannot start the engine: {exc}", err=True)
        raise SystemExit(2) from None
    options = ServerOptions(
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        openai_prompt_tokens_details=not no_prompt_tokens_details,
    )
    app = create_app(engine, options=options)
    click.echo(
        f"promptcache local backend on http://{host}:{port} (model {model}, "
        f"pool {pool_mb:g} MiB, block {block_size}, {mode} mode)",
        err=True,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)
