"""The linter on ../shared/corpus (real prompt files from public projects).

Every file lints without an input error, and the findings of the files below were reviewed
by hand and pinned (file -> expected (code, line, col, severity)). An empty list is a
reviewed negative: the file was checked for false positives and misses.

Review notes (why each pin is right):
- aider base_coder.py:1143 — ``datetime.now()...strftime("%Y-%m-%d")`` goes through
  ``get_platform_info`` and ``fmt_system_prompt`` into the role=system message: day
  granularity, info. The many ``time.time()`` calls (cache-warming timers) never reach a
  prompt, and are not reported.
- computer-use loop.py:61 — ``datetime.today().strftime('%A, %B %-d, %Y')`` inside the
  module-level SYSTEM_PROMPT reaches ``system=`` of ``beta.messages.with_raw_response.create``:
  day granularity, info (the demo deliberately coarsened it).
- gpt-researcher chat.py:214 — ``{datetime.now()}`` (microseconds) in the system prompt
  before the report: warning, every request misses.
- browser-use judge.py:91 — minute-granularity date in the judge's SystemMessage: warning.
  prompts.py's ``Today:`` date goes into the per-step user message, not the prefix: no finding.
- semantic-kernel chat_agent.py:49 — ``datetime.now().isoformat()`` (microseconds) in the
  agent's ``instructions=``: frozen per agent instance, so every process (or every agent built
  per request) writes a new system prompt: warning. The ``KernelArguments(now=...)`` at line 80
  feeds a per-turn invocation argument, not the prefix: no finding.
- research_lead_agent.md / research_subagent.md — Go-template ``{{.CurrentDate}}`` near the
  top of 4,000/1,800-token system prompts: day, info.
- semantic-kernel skprompt.txt (ChatGPT, ContextQuery) — ``{{date}}`` / ``{{time.Date}}``
  before stable text: info. 30-system-prompt.txt has ``{{ time.now }}`` but under 32 stable
  tokens after it: no finding.
- semantic-kernel JSON requests — under OpenAI's 1,024-token minimum (PC401, info); the RFC
  2822 time in the system message is not reported because nothing is cached at that size.
- OpenHands additional_info.j2 — ``{{ runtime_info.date }}`` is in the last lines (no stable
  text after it): no finding. letta prompt_generator.py receives its timestamp as a
  parameter (no source in the file): no finding (a known limit: no cross-module flow).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint import lint_paths

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"

PINNED: dict[str, list[tuple[str, int, int, str]]] = {
    "Aider-AI__aider/aider/coders/base_coder.py": [("PC101", 1143, 14, "info")],
    "Aider-AI__aider/aider/coders/chat_chunks.py": [],
    "anthropics__anthropic-cookbook/patterns/agents/prompts/research_lead_agent.md":
        [("PC104", 2, 21, "info")],
    "anthropics__anthropic-cookbook/patterns/agents/prompts/research_subagent.md":
        [("PC104", 1, 76, "info")],
    "anthropics__anthropic-cookbook/patterns/agents/prompts/citations_agent.md": [],
    "anthropics__anthropic-quickstarts/computer-use-demo/computer_use_demo/loop.py":
        [("PC101", 61, 24, "info")],
    "assafelovic__gpt-researcher/backend/chat/chat.py": [("PC101", 214, 42, "warning")],
    "browser-use__browser-use/browser_use/agent/judge.py": [("PC101", 91, 17, "warning")],
    "browser-use__browser-use/browser_use/agent/prompts.py": [],
    "microsoft__semantic-kernel/prompt_template_samples/ChatPlugin/ChatGPT/skprompt.txt":
        [("PC104", 6, 10, "info")],
    "microsoft__semantic-kernel/prompt_template_samples/QAPlugin/ContextQuery/skprompt.txt":
        [("PC104", 17, 10, "info")],
    "microsoft__semantic-kernel/dotnet/samples/Concepts/Resources/30-system-prompt.txt": [],
    "microsoft__semantic-kernel/python/samples/learn_resources/agent_docs/chat_agent.py":
        [("PC101", 49, 20, "warning")],
    "microsoft__semantic-kernel/dotnet/src/IntegrationTests/CrossLanguage/Data/"
    "PromptWithChatRolesTest.json": [("PC401", 1, 1, "info")],
    "microsoft__semantic-kernel/python/tests/integration/cross_language/data/"
    "prompt_with_helper_functions_expected.json": [("PC401", 1, 1, "info")],
    "All-Hands-AI__OpenHands/openhands/agenthub/codeact_agent/prompts/additional_info.j2": [],
    "All-Hands-AI__OpenHands/openhands/agenthub/codeact_agent/prompts/system_prompt.j2": [],
    "block__goose/crates/goose/src/prompts/system.md": [],
    "BerriAI__litellm/tests/integration/messages_endpoint/providers/anthropic/"
    "claude_code_request.json": [],
    "letta-ai__letta/letta/prompts/prompt_generator.py": [],
    "SWE-agent__SWE-agent/config/default.yaml": [],
    "huggingface__smolagents/src/smolagents/prompts/toolcalling_agent.yaml": [],
    "microsoft__prompty/runtime/prompty/tests/prompts/context.prompty": [],
    "google-gemini__gemini-cli/.gemini/commands/find-docs.toml": [],
    "promptfoo__promptfoo/examples/config-multi-turn/prompt.json": [],
}

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")


@pytest.fixture(scope="module")
def corpus_result():  # type: ignore[no-untyped-def]
    return lint_paths([str(CORPUS)])


def test_whole_corpus_lints_without_input_errors(corpus_result) -> None:  # type: ignore[no-untyped-def]
    assert corpus_result.errors == []
    # SOURCES.md's 49 files plus SOURCES.md itself (the walk used to skip every dot-folder,
    # and with it .gemini/commands/find-docs.toml)
    assert len(corpus_result.files) == 50
    for f in corpus_result.findings:
        assert f.line >= 1 and f.col >= 1


def test_at_least_15_files_pinned() -> None:
    assert len(PINNED) >= 15
    for rel in PINNED:
        assert (CORPUS / rel).is_file(), rel


@pytest.mark.parametrize("rel", sorted(PINNED))
def test_pinned_findings(corpus_result, rel: str) -> None:  # type: ignore[no-untyped-def]
    path = str(CORPUS / rel)
    got = [(f.code, f.line, f.col, f.severity.value) for f in corpus_result.findings
           if f.file == path]
    assert got == PINNED[rel]
