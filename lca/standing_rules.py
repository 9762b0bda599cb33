"""Which user turns set a standing rule: an instruction that holds for later, unrelated work.

A rule set in the first session ("never call the yarn organic", "anything going to the bank uses
hectolitres") must shape a task months later that shares no word with it, so similarity will not bring it
back; the handoff carries it forward instead (``lca.handoff``), until an event corrects or supersedes it.
The pruning classifier (``lca.context.classify_turn``) protects any instruction-like turn softly, where a
false alarm costs little; a rule carried into every later session costs context each time, so this reading
asks for more: the rule's scope (from now on, for everything you write, all season), a rule named as one,
or an imperative always/never at the head of a clause ("I never said that" is not one).
"""

from __future__ import annotations

import re

_SCOPE = re.compile(  # the instruction reaches past the task at hand
    r"\b(?:from now on|from here on|from this (?:moment|point)|going forward|henceforth|in (?:the )?future|"
    r"(?:until|till|unless) I (?:tell you|say|say so) otherwise|for the duration of|(?:all|any|every|for) future|"
    r"for the rest of (?:the|this|our) (?:season|year|term|semester|project|campaign)|"
    r"(?:all|the whole|this whole|for the) (?:season|term|semester|project|campaign)|"
    r"every (?:single )?time (?:you|we)|each time (?:you|we)|whenever (?:you|we)|"
    r"(?:make|treat|take|keep) (?:that|this|it) (?:as )?(?:your|the|a|our) default|as (?:a|the|your) default|"
    r"(?:applies|holds) (?:to|for) (?:all|every|any)|"
    r"(?:for|in|with|on|across) (?:anything|everything|all|any|each|every)(?: \w+){0,3}? (?:that )?"
    r"(?:you|we|goes|go)\b|"
    r"(?:anything|everything|whatever|(?:all|any|every|each)(?: \w+){1,2}) (?:that )?(?:you|we) "
    r"(?:write|draft|send|produce|prepare|post|publish|create|put out|make|suggest|recommend|propose|plan|help with)|"
    r"(?:anything|everything|whatever) (?:that )?(?:goes|going|gets sent) (?:out|to)|"
    r"(?:anything|everything|whatever) (?:that )?(?:ends? up|appears?|gets (?:printed|posted|published)|is (?:printed|"
    r"posted|published)) (?:on|in|into)\b(?=[^.!?]*\b(?:has to|have to|must|needs? to)\b)|"
    r"(?:in|for|to|on) (?:every|each|all|any)(?: \w+){0,2}? (?:e-?mails?|letters?|posts?|drafts?|documents?|"
    r"reports?|programmes?|programs?|handouts?|quotes?|minutes|rotas?|versions?|captions?|lesson plans?|invoices?|"
    r"newsletters?|replies|summar(?:y|ies)|slides?|proposals?|menus?|itinerar(?:y|ies)|commits?|recipes?)\b|"
    r"(?:sign off|end|start|open|close|finish) (?:every|each|all|any) )",
    re.IGNORECASE,
)
_NAMED_RULE = re.compile(  # the speaker calls it a rule
    r"\b(?:(?:ground|house|golden|standing|hard|firm|strict|iron|simple|one|a|our|my)[ -]rules?\b(?! of\b)|"
    r"non-?negotiables?|our policy|standing (?:instruction|order)s?|keep me honest|hold me to|"
    r"rules? (?:we|I) (?:agreed|set|settled on|decided on|laid down)\b)",
    re.IGNORECASE,
)
_MODAL_ALWAYS = re.compile(  # "must always", "should never", "I want every email to ..."
    r"\b(?:must|should|has to|have to|needs? to|will|to) (?:always|never)\b|"
    r"\b(?:i|we) (?:want|need|'d like|would like) (?:every|each|all) \w+",
    re.IGNORECASE,
)
_CLAUSE_HEAD_ALWAYS = re.compile(  # an imperative always/never opening a clause
    r"(?:^|[.!?:;,(\"'-]\s*|\b(?:and|but|so|please|just|also|then)\s+)"
    r"(?:always|never|don'?t ever|do not ever|never ever)\s+([a-z']+)",
    re.IGNORECASE,
)
_NOT_IMPERATIVE = frozenset(  # "Never done it." "Always been the case."
    "been done seen had heard got gotten gone known made said thought was were is are am did does do tried "
    "used liked mind the a an one with in on at for to of by as so".split()
)


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_QUESTION = re.compile(  # asks ("which tests should be non-negotiable?"); not a request ("can you make that the
    # default?") nor a sentence that quotes a question ("always finish with 'Need a lift?'")
    r"^\W*(?:(?:and|but|so|also|then)\s+)?(?!(?:can|could|would|will) you\b)(?:which|what|how|why|when|where|who|"
    r"whom|whose|should|shall|can|could|would|will|do|does|did|is|are|was|were|may|might|must)\b[^\"']*\?\W*$",
    re.IGNORECASE,
)


def standing_rule(text: str) -> str | None:
    """The cue that makes ``text`` (a user turn) set a standing rule, or None. A question ("which tests should be
    non-negotiable?") asks about a rule; it sets none."""
    for sentence in _SENTENCE.findall(text):
        if _QUESTION.match(sentence):
            continue
        for pattern in (_SCOPE, _NAMED_RULE, _MODAL_ALWAYS):
            found = pattern.search(sentence)
            if found:
                return found.group(0).strip()
        for found in _CLAUSE_HEAD_ALWAYS.finditer(sentence):
            verb = found.group(1).lower()
            if verb not in _NOT_IMPERATIVE and not verb.endswith("ed"):
                return found.group(0).strip(" .!?:;,(\"'-")
    return None
