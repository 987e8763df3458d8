"""The ``promptcache`` command line.

Subcommands live next to the part they drive and are imported lazily, so ``promptcache
--help`` stays fast and a missing optional extra (``local``, ``plot``) only affects the
commands that need it. Exit codes: 0 success / clean, 1 findings, 2 usage or input error.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ["main"]

# command name -> (module, attribute, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "lint": ("promptcache.lint.cli", "lint_command", "Lint requests, logs, templates and Python source."),
    "rule": ("promptcache.lint.cli", "rule_command", "Print the documentation of a lint rule."),
    "diff": ("promptcache.diff", "diff_command", "Explain why request B missed what request A wrote."),
    "explain": ("promptcache.diff", "explain_command", "Explain every cache miss in a request log."),
    "report": ("promptcache.usage.cli", "report_command", "Hit rate, cost and savings from a usage log."),
    "breakeven": ("promptcache.usage.cli", "breakeven_command", "Break-even and cheapest TTL policy."),
    "serve": ("promptcache.local.cli", "serve_command", "Serve the local reference backend."),
    "simulate": ("promptcache.sim.cli", "simulate_command", "Simulate prefix caches and schedulers."),
    "render": ("promptcache.prefix", "render_command", "Show a request as the provider caches it."),
    "count": ("promptcache.tokens", "count_command", "Count the tokens of a text or request."),
    "demo": ("promptcache.demo", "demo_command", "Run the end-to-end demo on the local backend."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr, short_help = spec
        try:
            module = importlib.import_module(module_name)
            command = getattr(module, attr)
        except (ImportError, AttributeError) as exc:
            reason = str(exc)

            @click.command(cmd_name, help=short_help, short_help=short_help,
                           context_settings={"ignore_unknown_options": True})
            @click.argument("args", nargs=-1, type=click.UNPROCESSED)
            def unavailable(args: tuple[str, ...]) -> None:
                raise click.UsageError(
                    f"'{cmd_name}' is unavailable ({reason}). If an optional extra is "
                    "missing, install it: pip install 'promptcache[local,plot]'"
                )

            return unavailable
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup)
@click.version_option(package_name="promptcache")
def main() -> None:
    """promptcache: make prompt caching work, and keep it working."""


def run(*args: Any) -> None:  # pragma: no cover - convenience for python -m
    main(*args)


if __name__ == "__main__":  # pragma: no cover
    main()
