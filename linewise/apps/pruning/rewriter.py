"""Coherence-aware thought rewriting with perplexity-based selection (paper 3.5, B.4).

Only a thought whose predecessor changed is rewritten: a kept step that directly
followed another kept step keeps its thought. A rewrite is asked with the shortened
dialogue so far, the raw content of the skipped steps and the original thought; several
candidates are drawn and the one with the lowest perplexity under the base model wins.

Perplexity comes from the endpoint's token logprobs. With chat completions a model only
reports logprobs of text it generates, so each candidate is scored by making the base
model generate exactly that text: the request carries a one-literal GBNF ``grammar``
(llama.cpp's constrained decoding, which the embedded server supports) and asks for
logprobs, which llama.cpp reports from the model's distribution before the grammar
constrains it — the teacher-forced probability of the candidate given the agent's own
prompt at that step. Where the endpoint refuses the grammar, ignores it (answers other
text) or sends no logprobs, the first candidate is taken and the reason recorded.

A candidate that repeats the original thought (the same words, small ones aside) is
not a rewrite and is dropped before scoring: the base model wrote the original, so it
would win on perplexity, and the thought would keep speaking of the pruned steps.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass

import structlog

from linewise.agent.constraint import Constraint
from linewise.agent.history import PastStep
from linewise.agent.models import ChatModel, TokenLogprob, call_model, call_model_with_logprobs
from linewise.agent.profile import profile_of
from linewise.agent.prompt import render_history
from linewise.apps.pruning.dialogue import PrunedStep, step_messages
from linewise.apps.pruning.trajectory import Trajectory, TrajectoryStep
from linewise.apps.pruning.workspace import content_words
from linewise.errors import EndpointUnreachable, LLMError
from linewise.prompts import render_prompt

log = structlog.get_logger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass
class RewriteUsage:
    rewrites: int = 0
    by_perplexity: int = 0
    first_candidate: int = 0
    copies_dropped: int = 0
    """Candidates dropped for repeating the original thought."""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ThoughtRewriter:
    """Rewrites the thoughts of a pruned trajectory; safe to use concurrently."""

    def __init__(
        self,
        rewriter: ChatModel,
        scorer: ChatModel | None,
        *,
        candidates: int = 3,
        temperature: float = 0.8,
        max_tokens: int = 400,
    ) -> None:
        self.rewriter = rewriter
        self.scorer = scorer
        self.candidates = candidates
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.usage = RewriteUsage()
        self._no_scoring: str | None = None if scorer is not None else "no base model to score"

    async def rewrite(self, trajectory: Trajectory, kept_positions: list[int]) -> list[PrunedStep]:
        """The kept steps (positions in ``trajectory.steps``) with coherent thoughts."""
        originals = {s.index: s for s in trajectory.steps}
        out: list[PrunedStep] = []
        previous = -1
        for position in sorted(kept_positions):
            step = trajectory.steps[position]
            if position == previous + 1:
                out.append(PrunedStep(index=step.index, think=step.think, action=step.action,
                                      original_think=step.think))
            else:
                skipped = trajectory.steps[previous + 1:position]
                out.append(await self._rewrite_step(trajectory, out, skipped, step, originals))
            previous = position
        return out

    async def _rewrite_step(
        self,
        trajectory: Trajectory,
        before: list[PrunedStep],
        skipped: list[TrajectoryStep],
        step: TrajectoryStep,
        originals: dict[int, TrajectoryStep],
    ) -> PrunedStep:
        prompt = render_prompt(
            "prune_rewrite.md",
            goal=trajectory.goal,
            history=render_history([PastStep(think=s.think, action=s.action) for s in before]),
            skipped=render_skipped(skipped),
            url=step.url,
            thought=step.think or "(none)",
            action=step.action or "(none)",
        )
        drawn = await asyncio.gather(*(self._candidate(prompt) for _ in range(self.candidates)))
        distinct = list(dict.fromkeys(c for c in drawn if c))
        original = content_words(step.think or "")
        candidates = [c for c in distinct if content_words(c) != original]
        self.usage.copies_dropped += len(distinct) - len(candidates)
        self.usage.rewrites += 1
        result = PrunedStep(index=step.index, think=step.think, action=step.action,
                            original_think=step.think, rewritten=True)
        if not candidates:
            result.rewritten = False
            result.selection = ("original: every candidate repeated it" if distinct else
                                "original: no usable rewrite candidate")
            return result
        messages = step_messages(trajectory.goal, step, before, originals)
        scores = await asyncio.gather(*(self._perplexity(messages, c) for c in candidates))
        result.candidates = [{"text": c, "perplexity": s} for c, s in
                             zip(candidates, scores, strict=True)]
        if all(s is not None for s in scores):
            best = min(range(len(candidates)), key=lambda i: (scores[i], i))
            result.think = candidates[best]
            result.selection = "perplexity"
            self.usage.by_perplexity += 1
        else:
            result.think = candidates[0]
            result.selection = f"first candidate: {self._no_scoring or 'scoring failed'}"
            self.usage.first_candidate += 1
        log.info("thought rewritten", trajectory=trajectory.key, step=step.index,
                 selection=result.selection)
        return result

    async def _candidate(self, prompt: str) -> str | None:
        try:
            call = await call_model(
                self.rewriter, [{"role": "user", "content": prompt}], purpose="other",
                temperature=self.temperature, max_tokens=self.max_tokens)
        except EndpointUnreachable:
            raise
        except LLMError as exc:
            log.warning("rewrite candidate failed", error=str(exc))
            return None
        self.usage.calls += 1
        self.usage.prompt_tokens += call.prompt_tokens
        self.usage.completion_tokens += call.completion_tokens
        return clean_thought(call.response or "")

    async def _perplexity(self, messages: list[dict[str, str]], candidate: str) -> float | None:
        """PPL of ``candidate`` as the agent's thought after ``messages``, or None."""
        if self.scorer is None or self._no_scoring is not None:
            return None
        forced = f"{THINK_OPEN}{candidate}{THINK_CLOSE}"
        profile = profile_of(self.scorer)
        if not profile.takes("grammar"):
            self._no_scoring = f"the base model's endpoint ({profile.name}) takes no grammar"
            return None
        params = profile.with_constraint(
            {"temperature": 0.0, "max_tokens": min(4 * len(forced) + 16, 8192)},
            Constraint.gbnf("thought", gbnf_literal(forced)))
        try:
            call, logprobs = await call_model_with_logprobs(self.scorer, messages, **params)
        except EndpointUnreachable:
            raise
        except LLMError as exc:
            self._no_scoring = f"the base model endpoint refused scoring ({exc})"[:300]
            return None
        self.usage.calls += 1
        if logprobs is None:
            self._no_scoring = "the base model endpoint returned no logprobs"
            return None
        if (call.response or "") != forced:
            self._no_scoring = "the base model endpoint ignored the grammar"
            return None
        return span_perplexity(logprobs, len(THINK_OPEN), len(THINK_OPEN) + len(candidate))


def render_skipped(steps: list[TrajectoryStep]) -> str:
    if not steps:
        return "(none: the steps before the start were removed)"
    lines = []
    for step in steps:
        lines.append(f"Step {step.index}: page {step.url}")
        if step.think:
            lines.append(f"  thought: {' '.join(step.think.split())}")
        lines.append(f"  action: {step.action or '(none)'}")
        if step.action_error:
            lines.append(f"  error: {step.action_error}")
    return "\n".join(lines)


_FRAMED = re.compile(r"^(?P<frame>[^\"\u201c]*\bthought\b[^\"\u201c]*:)\s*[\"\u201c]"
                     r"(?P<thought>[^\"\u201d]+)[\"\u201d]\.?$", re.IGNORECASE | re.DOTALL)


def clean_thought(text: str) -> str | None:
    """The thought in a rewrite answer: tags, a trailing action, quotes and a framing
    sentence (``The new thought could be: "…"``, which small models add) removed."""
    text = text.strip()
    if THINK_OPEN in text:
        text = text.split(THINK_OPEN, 1)[1]
    text = text.split(THINK_CLOSE, 1)[0].split("<action>", 1)[0].strip()
    framed = _FRAMED.match(text)
    if framed:
        text = framed.group("thought").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text or None


def gbnf_literal(text: str) -> str:
    """A GBNF grammar that allows exactly ``text``."""
    escaped = []
    for char in text:
        if char == "\\":
            escaped.append("\\\\")
        elif char == '"':
            escaped.append('\\"')
        elif char == "\n":
            escaped.append("\\n")
        elif char == "\r":
            escaped.append("\\r")
        elif char == "\t":
            escaped.append("\\t")
        elif ord(char) < 0x20:
            escaped.append(f"\\x{ord(char):02x}")
        else:
            escaped.append(char)
    return f'root ::= "{"".join(escaped)}"'


def span_perplexity(tokens: list[TokenLogprob], start: int, end: int) -> float | None:
    """exp(-mean logprob) of the tokens overlapping characters [start, end) of the answer."""
    offset = 0
    chosen: list[float] = []
    for token in tokens:
        token_end = offset + len(token.token)
        if token_end > start and offset < end:
            chosen.append(token.logprob)
        offset = token_end
    if not chosen:
        return None
    return math.exp(-sum(chosen) / len(chosen))
